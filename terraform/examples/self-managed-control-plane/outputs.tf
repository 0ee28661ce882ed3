output "function_uri" {
  description = "URL of the extender function."
  value       = module.extender.function_uri
}

output "kube_scheduler_configuration" {
  description = "Write to /etc/kubernetes/scheduler-config.yaml on each control-plane node and pass --config."
  value       = module.extender.kube_scheduler_configuration
  sensitive   = true
}
