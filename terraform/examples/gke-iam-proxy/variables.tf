variable "project_id" {
  description = "Project to deploy the extender function into."
  type        = string
}

variable "function_location" {
  description = "Region of the function, close to the cluster's control plane."
  type        = string
  default     = "us-central1"
}

variable "kubernetes_version" {
  description = "Version of the cluster's control plane as GKE prints it, e.g. \"1.31.4-gke.1256000\" or \"1.31.4\" (tags the kube-scheduler image v1.31.4)."
  type        = string
}

variable "proxy_image" {
  description = "Image with this repository's extender package (runs `python -m extender proxy`)."
  type        = string
}
