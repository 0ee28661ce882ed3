terraform {
  # 1.9 lets a variable's validation refer to other variables (weight vs. verbs, TLS vs. URL).
  required_version = ">= 1.9"
}
