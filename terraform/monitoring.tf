# Metrics and alerts built on the function's decision log entry (one per request, jsonPayload.event =
# "extender.decision", with verb, profile, status, durationMs and, on failure, error).

locals {
  decision_log_filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.function_name}\"",
    "jsonPayload.event=\"extender.decision\"",
  ])
  metric_labels = {
    verb    = "Extender verb: filter, prioritize, preempt, bind, healthz."
    profile = "Policy profile that answered."
  }
  metric_label_extractors = { for label, _ in local.metric_labels : label => "EXTRACT(jsonPayload.${label})" }
  latency_threshold_ms    = module.scheduler_config.http_timeout_ms * var.alert_latency_ratio
}

resource "google_logging_metric" "requests" {
  count = var.monitoring_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.function_name}/requests"
  description = "Requests kube-scheduler sent to the extender, by verb, profile and HTTP status."
  filter      = local.decision_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    dynamic "labels" {
      for_each = merge(local.metric_labels, { status = "HTTP status of the answer." })
      content {
        key         = labels.key
        value_type  = "STRING"
        description = labels.value
      }
    }
  }
  label_extractors = merge(local.metric_label_extractors, { status = "EXTRACT(jsonPayload.status)" })

  depends_on = [time_sleep.apis]
}

resource "google_logging_metric" "errors" {
  count = var.monitoring_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.function_name}/errors"
  description = "Answers that carried an error (failed the scheduling attempt unless ignorable), by verb and profile."
  filter      = "${local.decision_log_filter} AND jsonPayload.error:*"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    dynamic "labels" {
      for_each = local.metric_labels
      content {
        key         = labels.key
        value_type  = "STRING"
        description = labels.value
      }
    }
  }
  label_extractors = local.metric_label_extractors

  depends_on = [time_sleep.apis]
}

resource "google_logging_metric" "latency" {
  count = var.monitoring_enabled ? 1 : 0

  project         = var.project_id
  name            = "${var.function_name}/latency"
  description     = "Time the function spent on a request (durationMs), by verb and profile; kube-scheduler's httpTimeout is ${var.http_timeout}."
  filter          = local.decision_log_filter
  value_extractor = "EXTRACT(jsonPayload.durationMs)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "ms"

    dynamic "labels" {
      for_each = local.metric_labels
      content {
        key         = labels.key
        value_type  = "STRING"
        description = labels.value
      }
    }
  }
  label_extractors = local.metric_label_extractors

  bucket_options {
    # 1 ms to about 50 s in steps of 40%.
    exponential_buckets {
      num_finite_buckets = 32
      growth_factor      = 1.4
      scale              = 1
    }
  }

  depends_on = [time_sleep.apis]
}

# A new log-based metric takes a while to become known to Cloud Monitoring; an alert policy naming it before then is
# refused with 404 "Cannot find metric(s)".
resource "time_sleep" "metrics_propagation" {
  count = var.monitoring_enabled ? 1 : 0

  create_duration = "90s"
  triggers = {
    errors  = google_logging_metric.errors[0].id
    latency = google_logging_metric.latency[0].id
  }
}

resource "google_monitoring_alert_policy" "extender" {
  count = var.monitoring_enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.function_name}: scheduler extender slow or failing"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  conditions {
    display_name = "p99 latency above ${floor(var.alert_latency_ratio * 100)}% of httpTimeout ${var.http_timeout}"
    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.latency[0].name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = local.latency_threshold_ms
      duration        = "0s"

      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.verb"]
      }
      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "extender answered with errors"
    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.errors[0].name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.verb"]
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      kube-scheduler calls the extender `${var.function_name}` synchronously with httpTimeout ${var.http_timeout} and no retry.
      A filter or bind call that errs or times out fails that scheduling attempt${var.ignorable ? " (the extender is ignorable: the pod is scheduled without it)" : ""};
      a prioritize error is dropped silently by the scheduler.

      * Read the decisions: Logs Explorer, `${local.decision_log_filter}` and `severity>=WARNING`.
      * The `error` field says why; `durationMs` against `budgetMs` shows how close to the timeout the call came.
      * Latency: check cold starts (min_instance_count) and the node source (KUBERNETES_API_URL) first.
    EOT
  }

  depends_on = [time_sleep.metrics_propagation]
}
