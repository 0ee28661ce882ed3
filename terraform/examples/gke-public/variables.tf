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

variable "load_aware_scheduling" {
  description = "Place pods by the nodes' measured CPU utilisation too (NodeLoad on Cloud Monitoring's GKE metrics): nodes above 90% are avoided, the least loaded preferred."
  type        = bool
  default     = false
}
