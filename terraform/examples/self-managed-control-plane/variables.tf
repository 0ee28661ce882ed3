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
  description = "Version of the cluster's control plane, e.g. \"1.31.4\" (selects the kube-scheduler image)."
  type        = string
}

variable "policy_file" {
  description = "Your extender policy (check it first: python -m extender check-policy FILE), relative to the directory you run terraform in."
  type        = string
}

variable "scheduler_deployment" {
  description = "\"existing-scheduler\": the control plane's kube-scheduler gets --config. \"second-scheduler\": a second kube-scheduler Deployment that pods opt into with spec.schedulerName."
  type        = string
  default     = "existing-scheduler"
}

variable "scheduler_name" {
  description = "second-scheduler only: the spec.schedulerName pods set to be scheduled with the extender."
  type        = string
  default     = "extender-scheduler"
}

variable "managed_resources" {
  description = "existing-scheduler only: the extended resources whose pods the cluster's scheduler sends to the extender. [] sends every pod."
  type        = list(object({ name = string, ignored_by_scheduler = optional(bool, false) }))
  default     = [{ name = "example.com/gpu" }]
}

variable "kubernetes_api_url" {
  description = "The API server as the function reaches it, for a policy that reads node labels or bound pods from it (null: none)."
  type        = string
  default     = null
}

variable "kubernetes_ca_data" {
  description = "Base64 PEM CA of the API server (kubeadm: /etc/kubernetes/pki/ca.crt, base64 -w0). null: system roots."
  type        = string
  default     = null
}

variable "kubernetes_token_secret" {
  description = "Secret Manager secret holding the token of the extender's Kubernetes service account (deploy/kubernetes/extender-rbac.yaml); required with kubernetes_api_url."
  type        = string
  default     = null
}

variable "kubernetes_token_secret_version" {
  description = "Version number of that secret the function reads."
  type        = string
  default     = null
}
