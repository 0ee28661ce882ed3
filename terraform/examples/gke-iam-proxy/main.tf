# IAM-only invocation: the function accepts Google identities only; an identity proxy sidecar beside the second
# scheduler signs its calls as a Google service account bound to the scheduler's Kubernetes ServiceAccount.

module "extender" {
  source = "../.."

  project_id         = var.project_id
  function_location  = var.function_location
  invocation         = "iam"
  proxy_image        = var.proxy_image
  kubernetes_version = var.kubernetes_version
}
