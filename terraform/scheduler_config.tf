# The scheduler configuration, rendered from the variables and three facts of the deployment (locals of main.tf: the
# function's URL, the active caller token, the identity proxy's account). No provider: preflight/ renders it too, with
# stand-ins for those three, before anything exists ("Check before you apply" in README.md).

module "scheduler_config" {
  source = "./modules/scheduler-config"

  url                          = local.function_uri
  caller_token                 = local.caller_token
  profile                      = var.profile
  verbs                        = var.verbs
  weight                       = var.weight
  http_timeout                 = var.http_timeout
  ignorable                    = var.ignorable
  node_cache_capable           = var.node_cache_capable
  managed_resources            = var.managed_resources
  tls                          = var.tls
  tls_key_data                 = var.tls_key_data
  scheduler_name               = var.scheduler_name
  percentage_of_nodes_to_score = var.percentage_of_nodes_to_score
  namespace                    = var.scheduler_namespace
  leader_election_lease_name   = var.leader_election_lease_name
  scheduler_deployment         = var.scheduler_deployment
  kubeconfig                   = var.kubeconfig
  kubernetes_version           = var.kubernetes_version
  scheduler_image_repository   = var.scheduler_image_repository
  scheduler_image              = var.scheduler_image
  replicas                     = var.scheduler_replicas
  resources                    = var.scheduler_resources
  identity_proxy = var.invocation == "iam" ? {
    image                  = var.proxy_image
    port                   = 8001
    google_service_account = var.gke_workload_identity ? local.proxy_service_account_email : null
  } : null
}

# Nodes of a private cluster often have no internet egress, so they cannot pull from registry.k8s.io. The plan cannot
# know the nodes' egress, so this is a warning: it names the mirror setting.
check "private_cluster_scheduler_image" {
  assert {
    condition     = !local.kubernetes_api_private || var.scheduler_image != null || var.scheduler_image_repository != "registry.k8s.io/kube-scheduler"
    error_message = "kubernetes_api_url ${coalesce(var.kubernetes_api_url, "-")} is a private address, and the second scheduler's image comes from registry.k8s.io (scheduler_image_repository's default): nodes of a private cluster without internet egress cannot pull it, and the scheduler never starts. Set scheduler_image_repository to a mirror they reach, e.g. an Artifact Registry remote repository of https://registry.k8s.io (REGION-docker.pkg.dev/PROJECT/registry-k8s-io/kube-scheduler); nothing to do if the nodes reach registry.k8s.io (Cloud NAT)."
  }
}

# NodeLoad scores a node one point per tenth of its load, and kube-scheduler counts each point 10 x weight beside its
# own resource scores (0-100 each, higher for the emptier node, moving as pods land). At weight 1 these outweigh the
# load, and a burst spreads as without the extender. A warning, not a refusal: a policy may mean load as a tie-breaker.
check "node_load_score_weight" {
  assert {
    condition     = !local.policy_scores_node_load || !contains(var.verbs, "prioritize") || var.weight >= 3
    error_message = "The policy scores nodes with NodeLoad, but weight = ${var.weight}: each point of the extender's score counts ${var.weight * 10} beside kube-scheduler's own resource scores (0-100 each, favouring the emptier node), which then decide where a burst goes. In the documented burst (docs/plugins/nodeload.md, 32 pods on 8 nodes) weight 1 ended as without the extender (most loaded node 1.00), 2 at 0.95, 3 and more at 0.85. Set weight = 5 unless the load is meant as a tie-breaker."
  }
}
