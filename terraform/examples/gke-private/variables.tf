variable "project_id" {
  description = "Project of the cluster and of the extender function."
  type        = string
}

variable "region" {
  description = "Region of the cluster and of the function."
  type        = string
  default     = "us-central1"
}

variable "kubernetes_version" {
  description = "Version of the cluster's control plane, e.g. \"1.31.4\" (selects the kube-scheduler image)."
  type        = string
}

variable "scheduler_image" {
  description = "kube-scheduler image at the control plane's version, from a registry the private nodes can pull from: an Artifact Registry remote repository of registry.k8s.io, e.g. us-central1-docker.pkg.dev/my-project/registry-k8s-io/kube-scheduler:v1.31.4."
  type        = string
}

variable "proxy_image" {
  description = "Image with this repository's extender package (runs `python -m extender proxy`), in a registry the nodes can pull from."
  type        = string
}

variable "private_endpoint" {
  description = "Private endpoint of the control plane (google_container_cluster private_cluster_config[0].private_endpoint)."
  type        = string
}

variable "cluster_ca_certificate" {
  description = "Base64 PEM CA of the cluster (google_container_cluster master_auth[0].cluster_ca_certificate)."
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

variable "network" {
  description = "VPC network of the cluster, e.g. projects/my-project/global/networks/prod."
  type        = string
}

variable "subnetwork" {
  description = "Subnetwork (a /26 or larger in region) the function's instances take addresses from."
  type        = string
}
