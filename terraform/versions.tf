terraform {
  # 1.9: validations that refer to other variables (the identity proxy's image is required for IAM-only invocation).
  required_version = ">= 1.9"

  required_providers {
    google = {
      # 7.31: direct VPC egress of 2nd gen functions (GA), storage object generation.
      source  = "hashicorp/google"
      version = ">= 7.31, < 9.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5, < 4.0"
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }
}
