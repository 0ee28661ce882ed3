# Public invocation guarded by a caller token, and a second kube-scheduler on GKE that pods opt into.
# load_aware_scheduling = true serves policy-load-aware.yaml: NodeLoad reads each node's CPU utilisation from Cloud
# Monitoring (the gke preset) and the module grants the function's account roles/monitoring.viewer for it.

module "extender" {
  source = "../.."

  project_id         = var.project_id
  function_location  = var.function_location
  invocation         = "public"
  kubernetes_version = var.kubernetes_version
  policy_file        = "${path.module}/${var.load_aware_scheduling ? "policy-load-aware.yaml" : "policy.yaml"}"
  # NodeLoad's score outweighs kube-scheduler's own resource scores only from weight 3 on (docs/plugins/nodeload.md).
  weight = var.load_aware_scheduling ? 5 : 1
}
