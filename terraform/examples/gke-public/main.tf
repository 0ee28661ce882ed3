# Public invocation guarded by a caller token, and a second kube-scheduler on GKE that pods opt into.

module "extender" {
  source = "../.."

  project_id         = var.project_id
  function_location  = var.region
  invocation         = "public"
  kubernetes_version = var.kubernetes_version
  policy_file        = "${path.module}/policy.yaml"
}
