# A control plane you run yourself (kubeadm), either way round:
# - scheduler_deployment = "existing-scheduler": the cluster's own kube-scheduler gets the extender through --config
#   (kube_scheduler_configuration, with kubeadm's kubeconfig). Extenders apply to every profile of a scheduler, so
#   managed_resources limits the extender to the pods that ask for the resource it manages, and ignorable keeps the
#   cluster scheduling if the function is unreachable.
# - scheduler_deployment = "second-scheduler": a second kube-scheduler Deployment (kubernetes_manifests) with its own
#   ServiceAccount and in-cluster credentials; pods opt in with spec.schedulerName, every other pod is left alone.

locals {
  existing = var.scheduler_deployment == "existing-scheduler"
}

module "extender" {
  source = "../.."

  project_id           = var.project_id
  function_location    = var.function_location
  invocation           = "public"
  kubernetes_version   = var.kubernetes_version
  policy_file          = var.policy_file
  scheduler_deployment = var.scheduler_deployment

  scheduler_name             = local.existing ? "default-scheduler" : var.scheduler_name
  leader_election_lease_name = local.existing ? "kube-scheduler" : null
  kubeconfig                 = local.existing ? "/etc/kubernetes/scheduler.conf" : null
  managed_resources          = local.existing ? var.managed_resources : []
  ignorable                  = local.existing
  # The default scheduler places every pod: keep its own node sampling. The second one shows the extender every node.
  percentage_of_nodes_to_score = local.existing ? null : 100

  kubernetes_api_url              = var.kubernetes_api_url
  kubernetes_ca_data              = var.kubernetes_ca_data
  kubernetes_token_secret         = var.kubernetes_token_secret
  kubernetes_token_secret_version = var.kubernetes_token_secret_version
}
