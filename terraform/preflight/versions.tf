# No provider: the pre-flight plans and renders offline, without credentials.
terraform {
  required_version = ">= 1.9"
}
