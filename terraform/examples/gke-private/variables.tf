# Named as the root module names them (README.md says where each value comes from).

variable "project_id" {
  description = "Project of the cluster and of the extender function."
  type        = string
}

variable "function_location" {
  description = "Region of the cluster and of the function."
  type        = string
  default     = "us-central1"
}

variable "kubernetes_version" {
  description = "Version of the cluster's control plane as GKE prints it, e.g. \"1.31.4-gke.1256000\" (tags the kube-scheduler image v1.31.4)."
  type        = string
}

variable "policy_file" {
  description = "The extender policy. null: policy.yaml beside this file (node labels from the Kubernetes API)."
  type        = string
  default     = null
}

variable "scheduler_image_repository" {
  description = "Repository of kube-scheduler images the private nodes can pull from: an Artifact Registry remote repository of registry.k8s.io, e.g. us-central1-docker.pkg.dev/my-project/registry-k8s-io/kube-scheduler (the tag comes from kubernetes_version)."
  type        = string
}

variable "proxy_image" {
  description = "Image with this repository's extender package (runs `python -m extender proxy`), in a registry the nodes can pull from."
  type        = string
}

variable "kubernetes_api_url" {
  description = "The control plane's private endpoint as a URL, https://<privateClusterConfig.privateEndpoint>."
  type        = string
}

variable "kubernetes_ca_data" {
  description = "Base64 PEM CA of the cluster (masterAuth.clusterCaCertificate)."
  type        = string
}

variable "kubernetes_token_secret" {
  description = "Secret Manager secret holding the token of the extender's Kubernetes service account (deploy/kubernetes/extender-rbac.yaml)."
  type        = string
}

variable "kubernetes_token_secret_version" {
  description = "Version number of that secret the function reads."
  type        = string
}

variable "direct_vpc_network" {
  description = "VPC network of the cluster, e.g. projects/my-project/global/networks/prod."
  type        = string
}

variable "direct_vpc_subnetwork" {
  description = "Subnetwork (a /26 or larger in function_location) the function's instances take addresses from."
  type        = string
}
