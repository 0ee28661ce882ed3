# A control plane you run yourself (kubeadm): the existing kube-scheduler gets the extender through --config.
# Extenders apply to every profile of a scheduler, so managed_resources limits the extender to the pods that ask for
# the resource it manages; ignorable keeps the cluster scheduling if the function is unreachable.

module "extender" {
  source = "../.."

  project_id                 = var.project_id
  function_location          = var.function_location
  invocation                 = "public"
  kubernetes_version         = var.kubernetes_version
  scheduler_name             = "default-scheduler"
  leader_election_lease_name = "kube-scheduler"
  kubeconfig                 = "/etc/kubernetes/scheduler.conf"
  managed_resources          = [{ name = "example.com/gpu" }]
  ignorable                  = true
  # The default scheduler places every pod: keep its own node sampling.
  percentage_of_nodes_to_score = null
}
