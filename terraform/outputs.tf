output "function_uri" {
  description = "HTTPS URL of the function (the Cloud Run run.app URL kube-scheduler calls)."
  value       = google_cloudfunctions2_function.extender.service_config[0].uri
}

output "function_name" {
  description = "Name of the function and of its Cloud Run service."
  value       = google_cloudfunctions2_function.extender.name
}

output "function_service_account" {
  description = "Email of the service account the function runs as: function_service_account_email, or the account the module created."
  value       = local.function_service_account_email
}

output "url_prefix" {
  description = "urlPrefix kube-scheduler uses: function URL and caller token, or the identity proxy's loopback address."
  value       = module.scheduler_config.url_prefix
  sensitive   = true
}

output "extenders_yaml" {
  description = "The `extenders:` entry (YAML) to merge into an existing KubeSchedulerConfiguration."
  value       = module.scheduler_config.extenders_yaml
  sensitive   = true
}

output "kube_scheduler_configuration" {
  description = "Complete KubeSchedulerConfiguration v1 (one profile, the extender), for kube-scheduler --config."
  value       = module.scheduler_config.kube_scheduler_configuration
  sensitive   = true
}

output "kubernetes_manifests" {
  description = "Manifests for `kubectl apply -f`: the second scheduler (ServiceAccount, RBAC, configuration, Deployment), with in-cluster credentials. null with scheduler_deployment = \"existing-scheduler\"."
  value       = module.scheduler_config.kubernetes_manifests
  sensitive   = true
}

output "scheduler_name" {
  description = "spec.schedulerName that pods set to be scheduled with the extender."
  value       = module.scheduler_config.scheduler_name
}

output "tls_verification" {
  description = "How kube-scheduler verifies the function's certificate: system-roots, ca, insecure or plaintext-loopback (identity proxy)."
  value       = module.scheduler_config.tls_verification
}

output "caller_token_secret" {
  description = "Secret Manager secret holding the caller tokens, one version per accepted slot (null without a token)."
  value       = one(google_secret_manager_secret.caller_token[*].id)
}

output "caller_token_slots" {
  description = "The caller-token slots: the active one (its token is in url_prefix and the manifests) and the Secret Manager version of each accepted slot's token. null without a token."
  value = local.caller_token_enabled ? {
    active   = var.caller_token_active_slot
    versions = { for slot, version in google_secret_manager_secret_version.caller_token : slot => version.version }
  } : null
}

output "proxy_service_account" {
  description = "Email of the identity proxy's Google service account (IAM-only invocation), for Workload Identity or a key: proxy_service_account_email, or the account the module created."
  value       = local.proxy_service_account_email
}

output "metric_types" {
  description = "Cloud Monitoring metric types of the log-based metrics (requests, errors, unauthenticated, latency, rejections, would_reject)."
  value = var.monitoring_enabled ? merge(
    {
      for name, metric in {
        requests        = google_logging_metric.requests
        errors          = google_logging_metric.errors
        unauthenticated = google_logging_metric.unauthenticated
        latency         = google_logging_metric.latency
      } : name => "logging.googleapis.com/user/${metric[0].name}"
    },
    { for name, metric in google_logging_metric.by_rule : name => "logging.googleapis.com/user/${metric.name}" },
  ) : null
}

output "dashboard_url" {
  description = "Console URL of the Cloud Monitoring dashboard; null without one (dashboard_enabled, monitoring_enabled)."
  value = one([
    for dashboard in google_monitoring_dashboard.extender :
    "https://console.cloud.google.com/monitoring/dashboards/builder/${element(split("/", dashboard.id), 3)}?project=${var.project_id}"
  ])
}

output "alert_policies" {
  description = "Ids of the alert policies by alert (errors, rejected_calls, cloud_run_refused, cloud_run_failed, latency, cloud_run_latency, iam_refused, skipped, source_failures; in the cluster's project identity_proxy_failures and pending_pods); empty when monitoring is off."
  value = merge(
    { for name, policy in google_monitoring_alert_policy.extender : name => policy.name },
    { for name, policy in google_monitoring_alert_policy.cluster : name => policy.name },
  )
}
