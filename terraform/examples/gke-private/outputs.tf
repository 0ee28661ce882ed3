output "function_uri" {
  description = "URL of the extender function."
  value       = module.extender.function_uri
}

output "kubernetes_manifests" {
  description = "kubectl apply -f these: the second scheduler with its identity proxy sidecar."
  value       = module.extender.kubernetes_manifests
  sensitive   = true
}

output "scheduler_name" {
  description = "spec.schedulerName for pods that should use the extender."
  value       = module.extender.scheduler_name
}
