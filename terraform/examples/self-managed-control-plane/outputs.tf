output "function_uri" {
  description = "URL of the extender function."
  value       = module.extender.function_uri
}

output "kube_scheduler_configuration" {
  description = "existing-scheduler: write to /etc/kubernetes/scheduler-config.yaml on each control-plane node and pass --config."
  value       = module.extender.kube_scheduler_configuration
  sensitive   = true
}

output "kubernetes_manifests" {
  description = "second-scheduler: kubectl apply -f these (ServiceAccount, RBAC, configuration, Deployment). null with existing-scheduler."
  value       = module.extender.kubernetes_manifests
  sensitive   = true
}

output "scheduler_name" {
  description = "spec.schedulerName of the pods the extender sees (default-scheduler: every pod that names none)."
  value       = module.extender.scheduler_name
}
