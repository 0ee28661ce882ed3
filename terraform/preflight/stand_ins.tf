# What only the deployment knows, stood in for: the function's URL, the caller token (Terraform generates it at
# apply) and the identity proxy's service account. Everything else is the root module's own: its variables and their
# validations (variables.tf), and the scheduler configuration rendered from them (scheduler_config.tf).

locals {
  # A relative policy_file is read from the root module's directory (terraform/), where terraform.tfvars is written
  # for: -var-file=../terraform.tfvars means the same policy here as there.
  policy_directory            = "${path.root}/.."
  function_uri                = "https://${var.function_name}-preflight.a.run.app"
  caller_token                = local.caller_token_enabled ? "PreflightStandInForTheCallerTokenTerraformMakes00" : null
  proxy_service_account_email = var.invocation == "iam" ? coalesce(var.proxy_service_account_email, "${substr(var.function_name, 0, 24)}-proxy@${var.project_id}.iam.gserviceaccount.com") : null
}
