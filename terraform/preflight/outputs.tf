output "kube_scheduler_configuration" {
  description = "The KubeSchedulerConfiguration the root module renders for these variables, with the stand-ins of stand_ins.tf: check it with check-scheduler-config."
  value       = module.scheduler_config.kube_scheduler_configuration
  sensitive   = true
}

output "kubernetes_manifests" {
  description = "The second scheduler's manifests for these variables, with the stand-ins of stand_ins.tf."
  value       = module.scheduler_config.kubernetes_manifests
  sensitive   = true
}
