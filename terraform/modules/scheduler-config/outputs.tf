output "url_prefix" {
  description = "urlPrefix of the extender: the function URL (or the identity proxy's loopback address), then the caller token and the profile."
  value       = local.url_prefix
  sensitive   = true
}

output "extender" {
  description = "The `extenders[]` entry as an object, for embedding into a configuration built elsewhere."
  value       = local.extender
  sensitive   = true
}

output "extenders_yaml" {
  description = "YAML document `extenders: [...]` to merge into an existing KubeSchedulerConfiguration."
  value       = yamlencode({ extenders = [local.extender] })
  sensitive   = true
}

output "kube_scheduler_configuration" {
  description = "Complete KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) with one profile and the extender, for kube-scheduler --config."
  value       = local.kube_scheduler_configuration_yaml
  sensitive   = true
}

output "kubernetes_manifests" {
  description = "Multi-document YAML for `kubectl apply -f`: ServiceAccount, RBAC, the configuration (a Secret when it holds the caller token, else a ConfigMap) and the second scheduler's Deployment, which authenticates with in-cluster credentials. null with scheduler_deployment = \"existing-scheduler\"."
  value       = var.scheduler_deployment == "second-scheduler" ? local.kubernetes_manifests_yaml : null
  sensitive   = true
}

output "http_timeout_ms" {
  description = "http_timeout in milliseconds, the latency budget of one call (the function's timeout and alerting thresholds derive from it)."
  value       = local.http_timeout_ms

  precondition {
    # Checked here, not in a validation of http_timeout: a validation cannot use a local derived from its own variable.
    condition     = local.http_timeout_ms <= 3600000
    error_message = "http_timeout must be at most 1h: the function's timeout follows it, and Cloud Run caps a request at 3600 s."
  }
}

output "tls_verification" {
  description = "How kube-scheduler checks the server: system-roots, ca, insecure (explicitly requested), or plaintext-loopback (the identity proxy or a local extender)."
  value       = local.tls_verification
}

output "scheduler_name" {
  description = "schedulerName that pods set to be scheduled with the extender."
  value       = var.scheduler_name
}
