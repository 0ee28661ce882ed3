# A private GKE cluster: the function reaches the control plane's private endpoint over the VPC (direct VPC egress)
# to look nodes up and to bind pods, and only accepts calls from inside the VPC, signed by the identity proxy.

module "extender" {
  source = "../.."

  project_id         = var.project_id
  function_location  = var.function_location
  invocation         = "iam"
  proxy_image        = var.proxy_image
  kubernetes_version = var.kubernetes_version
  policy_file        = coalesce(var.policy_file, "${path.module}/policy.yaml")
  # Private nodes cannot pull from registry.k8s.io: the second scheduler's image comes from a mirror, tagged by
  # kubernetes_version.
  scheduler_image_repository = var.scheduler_image_repository
  verbs                      = ["filter", "prioritize", "bind"]

  kubernetes_api_url              = var.kubernetes_api_url
  kubernetes_ca_data              = var.kubernetes_ca_data
  kubernetes_token_secret         = var.kubernetes_token_secret
  kubernetes_token_secret_version = var.kubernetes_token_secret_version

  direct_vpc_network    = var.direct_vpc_network
  direct_vpc_subnetwork = var.direct_vpc_subnetwork
  # The scheduler's pods reach the function through Private Google Access of the same project's VPC.
  ingress_settings = "ALLOW_INTERNAL_ONLY"
}
