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

  # Counted per plugin and rule, from the entries the function logs one per plugin and rule of a request, next to its
  # decision entry (a log-based metric counts entries and cannot look into the decision entry's lists): what enforced
  # plugins rejected (filter) or vetoed (preempt), and what audited ones (enforcement: Audit) would have. Each count
  # is one scheduling call in which a plugin's rule rejected (or would have) at least one node.
  rule_metrics = {
    # What the policy keeps pods off.
    rejections = {
      event       = "extender.rejection"
      description = "Calls in which an enforced plugin rejected nodes (filter) or vetoed candidates (preempt), by plugin, rule, verb and profile."
      labels = {
        plugin = "Plugin that rejected nodes (filter) or vetoed candidates (preempt)."
        rule   = "Rule its reason names (NodeLabelPolicy, NodeLoad and ProtectedVictims rules, NodeNameFilter maintenance entries), empty when none."
      }
    }
    # Roll-out of a new rule: enable its plugin with enforcement: Audit, read this metric for a week, then Enforce
    # (docs/policy.md).
    would_reject = {
      event       = "extender.audit"
      description = "Calls in which an audited plugin (enforcement: Audit) would have rejected or vetoed nodes, by plugin, rule, verdict, verb and profile. Nothing was rejected: the nodes passed."
      labels = {
        plugin  = "Audited plugin that would have rejected or vetoed."
        rule    = "Rule its reason names (NodeLabelPolicy, NodeLoad and ProtectedVictims rules, NodeNameFilter maintenance entries), empty when none."
        verdict = "wouldReject (filter) or wouldVeto (preempt)."
      }
    }
    # Rules not evaluated: a query that never answers under failurePolicy Ignore leaves would_reject at 0 while
    # nothing is judged (docs/observability.md).
    skipped = {
      event       = "extender.skipped"
      description = "Calls in which a plugin did not judge some nodes (their facts missing, or the scheduler's filter trusted), by plugin, rule, code, verb and profile. code Success: the nodes passed unjudged."
      labels = {
        plugin = "Plugin that did not judge the nodes."
        rule   = "Rule its reason names (NodeLoad: the first applicable rule reading the metric without a fresh sample), empty when none."
        code   = "What followed: Success, passed unjudged (failurePolicy Ignore, or preemptTrustsSchedulerFilter); Unschedulable, rejected, scored 0 or vetoed (failurePolicy Fail)."
      }
    }
  }

  # The function's WARNINGs about a source it reads (NodeLoad's Prometheus or Cloud Monitoring, the Kubernetes API):
  # each names it in `source`. Prometheus answers used despite something odd in them are no failure.
  source_failures_log_filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.function_name}\"",
    "severity>=WARNING",
    "jsonPayload.source:*",
    "NOT jsonPayload.outcome=\"answer used\"",
  ])
  # The identity proxy's own failures, logged in the cluster (the proxy answers them itself: Cloud Run never sees
  # these calls), as GKE's logging agent turns its JSON lines into entries.
  identity_proxy_log_filter = join(" AND ", [
    "resource.type=\"k8s_container\"",
    "resource.labels.namespace_name=\"${var.scheduler_namespace}\"",
    "resource.labels.container_name=\"identity-proxy\"",
    "jsonPayload.event=\"extender.proxy\"",
  ])

  # A 404 is the one answer to a request without the caller token; every other error reached a routed call.
  errors_log_filter          = "${local.decision_log_filter} AND jsonPayload.error:* AND jsonPayload.status!=404"
  unauthenticated_log_filter = "${local.decision_log_filter} AND jsonPayload.status=404"

  # IAM-only invocation: what Cloud Run refused before the function ran, from its request log. Neither that log nor
  # Cloud Run's metrics name the caller of a refused request; a POST to a verb path is what the identity proxy
  # forwards, while internet probes (also answered 401/403) send GETs to other paths.
  verb_path_regex = "/(filter|prioritize|preempt|bind)$"
  iam_refused_log_filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.function_name}\"",
    "logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Frequests\"",
    "httpRequest.status=(401 OR 403)",
    "httpRequest.requestMethod=\"POST\"",
    "httpRequest.requestUrl=~\"${local.verb_path_regex}\"",
  ])
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
  description = "Answers to routed calls that carried an error (failed the scheduling attempt unless ignorable), by verb and profile. 404s (calls without the token) are counted by unauthenticated instead."
  filter      = local.errors_log_filter

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

# Requests without the caller token (a bare 404): internet probes, which need no one's attention, and callers with a
# wrong or rotated-out token, which do. A POST to a verb path is what kube-scheduler sends.
resource "google_logging_metric" "unauthenticated" {
  count = var.monitoring_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.function_name}/unauthenticated"
  description = "Requests refused for want of the caller token (404), by HTTP method and the verb their path ends with (empty: not a verb path)."
  filter      = local.unauthenticated_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "method"
      value_type  = "STRING"
      description = "HTTP method: kube-scheduler always POSTs."
    }
    labels {
      key         = "verb_path"
      value_type  = "STRING"
      description = "Extender verb the path ends with, empty for any other path."
    }
  }
  label_extractors = {
    method    = "EXTRACT(jsonPayload.method)"
    verb_path = "REGEXP_EXTRACT(jsonPayload.path, \"${local.verb_path_regex}\")"
  }

  depends_on = [time_sleep.apis]
}

resource "google_logging_metric" "iam_refused" {
  count = var.monitoring_enabled && var.invocation == "iam" ? 1 : 0

  project     = var.project_id
  name        = "${var.function_name}/iam_refused"
  description = "Scheduler calls (POSTs to a verb path) that Cloud Run refused with 401 or 403 before the function ran (IAM-only invocation), by status and verb."
  filter      = local.iam_refused_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "status"
      value_type  = "STRING"
      description = "401: no valid ID token (audience, expiry); 403: a token of an identity without roles/run.invoker."
    }
    labels {
      key         = "verb"
      value_type  = "STRING"
      description = "Extender verb the refused call was for."
    }
  }
  label_extractors = {
    status = "EXTRACT(httpRequest.status)"
    verb   = "REGEXP_EXTRACT(httpRequest.requestUrl, \"${local.verb_path_regex}\")"
  }

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

resource "google_logging_metric" "by_rule" {
  for_each = { for name, metric in local.rule_metrics : name => metric if var.monitoring_enabled }

  project     = var.project_id
  name        = "${var.function_name}/${each.key}"
  description = each.value.description
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.function_name}\"",
    "jsonPayload.event=\"${each.value.event}\"",
  ])

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    dynamic "labels" {
      for_each = merge(local.metric_labels, each.value.labels)
      content {
        key         = labels.key
        value_type  = "STRING"
        description = labels.value
      }
    }
  }
  label_extractors = merge(
    local.metric_label_extractors,
    { for label, _ in each.value.labels : label => "EXTRACT(jsonPayload.${label})" },
  )

  depends_on = [time_sleep.apis]
}

resource "google_logging_metric" "source_failures" {
  count = var.monitoring_enabled ? 1 : 0

  project     = var.project_id
  name        = "${var.function_name}/source_failures"
  description = "WARNINGs about a source the function reads that gave no usable answer: NodeLoad's Prometheus or Cloud Monitoring, the Kubernetes API (node list, bound pods, victim pods), by source and entry."
  filter      = local.source_failures_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "source"
      value_type  = "STRING"
      description = "prometheus, cloud-monitoring or kubernetes."
    }
    labels {
      key         = "event"
      value_type  = "STRING"
      description = "Which reader warned: extender.nodeload (NodeLoad's refresh and in-flight pods), extender.nodesource (the node list), extender.preempt (victim pods)."
    }
  }
  label_extractors = {
    source = "EXTRACT(jsonPayload.source)"
    event  = "EXTRACT(jsonPayload.event)"
  }

  depends_on = [time_sleep.apis]
}

# In the cluster's project, where the proxy's entries are logged.
resource "google_logging_metric" "identity_proxy_failures" {
  count = var.monitoring_enabled && var.invocation == "iam" ? 1 : 0

  project     = local.cluster_project_id
  name        = "${var.function_name}/identity_proxy_failures"
  description = "Calls the identity proxy answered itself with an error (no ID token, the function unreachable or slow, a request it cannot forward), its failed readiness probes, and the function's refusals of its token, by kind and status."
  filter      = local.identity_proxy_log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "failure"
      value_type  = "STRING"
      description = "no_id_token, unreachable, timeout, refused (401/403 from the function) or request (a request it cannot forward)."
    }
    labels {
      key         = "status"
      value_type  = "STRING"
      description = "HTTP status: the proxy's own (502, 503 on its readiness path, 504, 4xx) or the function's refusal."
    }
  }
  label_extractors = {
    failure = "EXTRACT(jsonPayload.failure)"
    status  = "EXTRACT(jsonPayload.status)"
  }

  depends_on = [time_sleep.apis]
}

moved {
  from = google_logging_metric.would_reject[0]
  to   = google_logging_metric.by_rule["would_reject"]
}

# A new log-based metric takes a while to become known to Cloud Monitoring; an alert policy naming it before then is
# refused with 404 "Cannot find metric(s)".
resource "time_sleep" "metrics_propagation" {
  count = var.monitoring_enabled ? 1 : 0

  create_duration = "90s"
  triggers = {
    errors          = google_logging_metric.errors[0].id
    unauthenticated = google_logging_metric.unauthenticated[0].id
    latency         = google_logging_metric.latency[0].id
    iam_refused     = join(",", google_logging_metric.iam_refused[*].id)
    by_rule         = join(",", [for metric in google_logging_metric.by_rule : metric.id])
    source_failures = google_logging_metric.source_failures[0].id
    identity_proxy  = join(",", google_logging_metric.identity_proxy_failures[*].id)
  }
}

locals {
  alert_window     = "${var.alert_window_minutes * 60}s"
  cloud_run_filter = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${var.function_name}\""
  user_metric      = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user"
  read_decisions   = "Read the decisions: Logs Explorer, `${local.decision_log_filter}` and `severity>=WARNING`; `error` says why, `durationMs` against `budgetMs` how close to the timeout the call came."
  failure_effect   = var.ignorable ? "The extender is ignorable: the scheduler places pods without it while it fails." : "A failed filter, preempt or bind call fails that scheduling attempt (the pod waits for the next try); a failed prioritize call is dropped silently."
  # With IAM-only invocation, 401 and 403 are IAM's refusals: the scheduler's are counted by iam_refused, and internet
  # probes get them all the time.
  cloud_run_refused_codes = var.invocation == "iam" ? "\"401\", \"403\", \"404\"" : "\"404\""

  # The latency alerts in PromQL (Cloud Monitoring's names: the first "/" becomes ":", other specials "_"): p99 above
  # the threshold and at least alert_latency_min_requests calls in the window, per verb for the function's own metric.
  promql_window           = "${var.alert_window_minutes}m"
  promql_latency          = "logging_googleapis_com:user_${replace(var.function_name, "-", "_")}_latency"
  promql_function         = "monitored_resource=\"cloud_run_revision\""
  promql_cloud_run        = "monitored_resource=\"cloud_run_revision\",service_name=\"${var.function_name}\""
  latency_query           = <<-EOT
    histogram_quantile(0.99, sum by (verb, le) (rate(${local.promql_latency}_bucket{${local.promql_function}}[${local.promql_window}])))
      > ${local.latency_threshold_ms}
    and on (verb)
    sum by (verb) (increase(${local.promql_latency}_count{${local.promql_function}}[${local.promql_window}]))
      >= ${var.alert_latency_min_requests}
  EOT
  cloud_run_latency_query = <<-EOT
    histogram_quantile(0.99, sum by (le) (rate(run_googleapis_com:request_latencies_bucket{${local.promql_cloud_run}}[${local.promql_window}])))
      > ${local.latency_threshold_ms}
    and
    sum(increase(run_googleapis_com:request_latencies_count{${local.promql_cloud_run}}[${local.promql_window}]))
      >= ${var.alert_latency_min_requests}
  EOT

  # One policy per meaning, each with its own runbook. Counts are summed over alert_window_minutes: one stray failure
  # never pages, a steady stream does. Each alert has a threshold condition or a PromQL one.
  alerts = { for name, alert in local.alert_definitions : name => alert if name != "iam_refused" || var.invocation == "iam" }
  alert_definitions = {
    errors = {
      display_name = "errors answering the scheduler"
      promql       = null
      threshold = {
        filter   = "${local.user_metric}/${var.function_name}/errors\""
        group_by = ["metric.label.verb"]
      }
      runbook = <<-EOT
        The function answered at least ${var.alert_error_count} of kube-scheduler's calls with an error within ${var.alert_window_minutes} min.
        ${local.failure_effect}

        * ${local.read_decisions}
        * A plugin error names the plugin (`errorPlugin`): fix its configuration in the policy, or its node source (KUBERNETES_API_URL reachable? see private clusters).
        * `body too large` / 413: node_cache_capable = false on a large cluster; switch to node names.
        * Budget exhausted: see the latency alert.
      EOT
    }
    rejected_calls = {
      display_name = "scheduler calls without a valid caller token"
      promql       = null
      threshold = {
        filter   = "${local.user_metric}/${var.function_name}/unauthenticated\" AND metric.label.method=\"POST\" AND metric.label.verb_path=one_of(\"filter\", \"prioritize\", \"preempt\", \"bind\")"
        group_by = ["metric.label.verb_path"]
      }
      runbook = <<-EOT
        At least ${var.alert_error_count} POSTs to a verb path without a valid caller token within ${var.alert_window_minutes} min: most likely a scheduler on a token the function no longer accepts, and every such call fails.

        * A rotation in progress? A scheduler still runs a configuration from before the switch of `caller_token_active_slot`: apply the current one (`terraform output -raw kubernetes_manifests | kubectl apply -f -`, or rewrite the control-plane file and restart kube-scheduler). A dropped slot's token is gone for good.
        * Otherwise someone knows the verb paths but not the token: read Cloud Run's request log for the callers' addresses.
        * GETs and other paths (the `unauthenticated` metric) are internet probes: they are answered with a bare 404 and need nothing.
      EOT
    }
    cloud_run_refused = {
      display_name = "Cloud Run refused calls (4xx other than ${var.invocation == "iam" ? "401, 403 and 404" : "404"})"
      promql       = null
      threshold = {
        filter   = "${local.cloud_run_filter} AND metric.type=\"run.googleapis.com/request_count\" AND metric.label.response_code_class=\"4xx\" AND NOT metric.label.response_code=one_of(${local.cloud_run_refused_codes})"
        group_by = ["metric.label.response_code"]
      }
      runbook = <<-EOT
        At least ${var.alert_error_count} requests answered 4xx (other than ${var.invocation == "iam" ? "401, 403 and 404: see iam_refused" : "404"}) within ${var.alert_window_minutes} min, counted by Cloud Run, so including answers the function never logged.
        ${local.failure_effect} These answers carry the status only, so kube-scheduler's error, with the URL and its caller token, lands in the pod's events.

        * 429: no instance could take the request. Raise max_instance_count (now ${var.max_instance_count}) or concurrency (now ${var.concurrency}); keep min_instance_count >= 1.
        * 413: a request above Cloud Run's 32 MB limit; use node_cache_capable = true.
        * 400: a malformed request; read the decision log.
      EOT
    }
    cloud_run_failed = {
      display_name = "Cloud Run failed calls (5xx, timeouts)"
      promql       = null
      threshold = {
        filter   = "${local.cloud_run_filter} AND metric.type=\"run.googleapis.com/request_count\" AND metric.label.response_code_class=\"5xx\""
        group_by = ["metric.label.response_code"]
      }
      runbook = <<-EOT
        At least ${var.alert_error_count} requests answered 5xx within ${var.alert_window_minutes} min, counted by Cloud Run: 503 (instance crashed or not ready), 504 (the function's timeout, ${local.http_timeout_seconds} s), 500.
        ${local.failure_effect} kube-scheduler writes its error, with the URL and its caller token, into the pod's events.

        * Cloud Run's request log and the function's ERROR entries (`severity>=ERROR`) show the cause; a revision that does not start shows in the deployment's logs.
        * 504: see the latency alert; 503 right after a deploy: a failing new revision (roll back by applying the previous version).
      EOT
    }
    skipped = {
      display_name = "rules not evaluated (skipped)"
      promql       = null
      threshold = {
        filter   = "${local.user_metric}/${var.function_name}/skipped\""
        group_by = ["metric.label.plugin", "metric.label.rule", "metric.label.code"]
      }
      runbook = <<-EOT
        In at least ${var.alert_error_count} calls within ${var.alert_window_minutes} min a plugin did not judge some nodes: their facts were missing (a source down, a query that never answers, a node not listed yet) or preempt trusted the scheduler's filter. With code Success the nodes passed unjudged (failurePolicy Ignore): the rule is not enforced, and an audited one's `would_reject` stays 0 whatever it would do. With another code they were rejected, scored 0 or vetoed (failurePolicy Fail).

        * Why: Logs Explorer, `${local.decision_log_filter} AND jsonPayload.skipped:*`; `skipped.reasons` name the cause (a NodeLoad metric with no answer: its query, or Prometheus; a node the Kubernetes API does not list).
        * The source failures alert usually fires with it: fix the source (the query, credentials, KUBERNETES_API_URL), and check with `python -m extender check-policy` and `explain`.
        * Never move an audited rule to Enforce while this fires: a zero `would_reject` means nothing while its rule is not evaluated.
      EOT
    }
    source_failures = {
      display_name = "sources failing (Prometheus, Cloud Monitoring, Kubernetes API)"
      promql       = null
      threshold = {
        filter   = "${local.user_metric}/${var.function_name}/source_failures\""
        group_by = ["metric.label.source"]
      }
      runbook = <<-EOT
        At least ${var.alert_error_count} WARNINGs within ${var.alert_window_minutes} min about a source that gave no usable answer: NodeLoad's Prometheus or Cloud Monitoring (a query refused, unreachable, slow, or not an answer), or the Kubernetes API (the node list, the bound pods NodeLoad counts in flight, preempt's victim pods). Requests go on from what the function knows, each plugin's failurePolicy deciding for what it lacks: see the skipped alert.

        * The entries: Logs Explorer, `resource.labels.service_name="${var.function_name}" AND jsonPayload.source:* AND severity>=WARNING`; `problem` says why, `outcome` what followed.
        * prometheus / cloud-monitoring: run the metric's query by hand; a 400 is the query itself, 401/403 its credentials (Cloud Monitoring: the function's service account needs roles/monitoring.viewer on the project it reads).
        * kubernetes: KUBERNETES_API_URL reachable from the function (private clusters: direct VPC egress), its token valid and allowed by the RBAC the module renders.
      EOT
    }
    latency = {
      display_name = "function p99 latency above ${floor(var.alert_latency_ratio * 100)}% of httpTimeout ${var.http_timeout}"
      promql       = local.latency_query
      threshold    = null
      runbook      = <<-EOT
        For ${var.alert_window_minutes} min, a verb's p99 time in the function was above ${local.latency_threshold_ms} ms over at least ${var.alert_latency_min_requests} calls; kube-scheduler gives up at ${var.http_timeout}.

        * ${local.read_decisions}
        * `pluginMs` shows which plugin spends the time; the node source (KUBERNETES_API_URL) is the usual suspect.
      EOT
    }
    cloud_run_latency = {
      display_name = "Cloud Run p99 latency above ${floor(var.alert_latency_ratio * 100)}% of httpTimeout ${var.http_timeout}"
      promql       = local.cloud_run_latency_query
      threshold    = null
      runbook      = <<-EOT
        For ${var.alert_window_minutes} min, p99 request latency as Cloud Run measures it (queueing and cold starts included) was above ${local.latency_threshold_ms} ms over at least ${var.alert_latency_min_requests} requests; kube-scheduler gives up at ${var.http_timeout}, and a timeout puts the URL with its caller token into the pod's events.

        * If the function latency alert is quiet, the time is spent before the function runs: cold starts (keep min_instance_count >= 1, now ${var.min_instance_count}) or requests waiting for a thread (raise concurrency or max_instance_count).
      EOT
    }
    iam_refused = {
      display_name = "scheduler calls refused by Cloud Run IAM (401/403)"
      promql       = null
      threshold = {
        filter   = "${local.user_metric}/${var.function_name}/iam_refused\""
        group_by = ["metric.label.status"]
      }
      runbook = <<-EOT
        At least ${var.alert_error_count} scheduler calls (POSTs to a verb path) within ${var.alert_window_minutes} min were refused by Cloud Run's IAM check before the function ran: the identity proxy cannot call the function, and every such call fails. Internet probes, also answered 401/403, are left out (they do not POST to verb paths).
        ${local.failure_effect}

        * The proxy logs each refusal at WARNING: `kubectl -n ${var.scheduler_namespace} logs deployment/${var.scheduler_name} -c identity-proxy`.
        * 403, a token of an identity without `roles/run.invoker`: `gcloud run services get-iam-policy ${var.function_name} --region ${var.function_location}` must list `serviceAccount:${coalesce(var.proxy_service_account_email, "<proxy_service_account output>")}`. Workload Identity not in effect gives the pod the node's identity instead: the node pool must run the GKE metadata server, the Kubernetes ServiceAccount ${var.scheduler_namespace}/${var.scheduler_name} must carry the annotation `iam.gke.io/gcp-service-account`, and the proxy account must grant it `roles/iam.workloadIdentityUser`.
        * 401, no valid ID token: its audience must be the function's URL (the proxy takes the scheme and host of its target); a clock far off expires tokens early.
      EOT
    }
  }
}

resource "google_monitoring_alert_policy" "extender" {
  for_each = var.monitoring_enabled ? local.alerts : {}

  project               = var.project_id
  display_name          = "${var.function_name}: ${each.value.display_name}"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  conditions {
    display_name = each.value.display_name

    # Counts summed over the window: alert_error_count of them open an incident.
    dynamic "condition_threshold" {
      for_each = each.value.threshold == null ? [] : [each.value.threshold]
      content {
        filter          = condition_threshold.value.filter
        comparison      = "COMPARISON_GT"
        threshold_value = var.alert_error_count - 1
        duration        = "0s"

        aggregations {
          alignment_period     = local.alert_window
          per_series_aligner   = "ALIGN_SUM"
          cross_series_reducer = "REDUCE_SUM"
          group_by_fields      = condition_threshold.value.group_by
        }
        trigger {
          count = 1
        }
      }
    }
    # Latency: true for the whole window before an incident opens.
    dynamic "condition_prometheus_query_language" {
      for_each = each.value.promql == null ? [] : [each.value.promql]
      content {
        query    = condition_prometheus_query_language.value
        duration = local.alert_window
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "kube-scheduler calls the extender `${var.function_name}` synchronously (httpTimeout ${var.http_timeout}, no retry).\n\n${each.value.runbook}"
  }

  depends_on = [time_sleep.metrics_propagation]
}

# What happens in the cluster, alerted on in the cluster's project where its logs and metrics are: the identity
# proxy's own failures (its log-based metric), and pods the second scheduler does not place (kube state metrics, GKE's
# package in Managed Service for Prometheus: kube-scheduler's own metrics need authenticated scraping, and the function
# sees only the pods the scheduler asks about, never those waiting for a scheduler that is down).
locals {
  scheduler_deployment  = "namespace=\"${var.scheduler_namespace}\",deployment=\"${var.scheduler_name}\""
  pending_pods_duration = "${var.alert_window_minutes * 2 * 60}s"
  pending_pods_query    = <<-EOT
    max by (namespace, deployment) (kube_deployment_status_replicas_available{${local.scheduler_deployment}}) < 1
    or
    absent(kube_deployment_status_replicas_available{${local.scheduler_deployment}})
    or
    sum by (namespace) (kube_pod_status_unschedulable) > 0
  EOT
  cluster_alert_definitions = {
    identity_proxy_failures = {
      display_name = "identity proxy failing (calls that never reached Cloud Run)"
      promql       = null
      duration     = "0s"
      threshold = {
        filter   = "resource.type=\"k8s_container\" AND metric.type=\"logging.googleapis.com/user/${var.function_name}/identity_proxy_failures\""
        group_by = ["metric.label.failure"]
      }
      runbook = <<-EOT
        The identity proxy beside the second scheduler logged at least ${var.alert_error_count} failures within ${var.alert_window_minutes} min. It answers these calls itself (502 without an ID token or when the function cannot be reached, 504 when it is slow), so Cloud Run never sees them and no function alert fires; its readiness probe fails while it cannot mint tokens (`kubectl -n ${var.scheduler_namespace} get pods`: the pods show 1/2 ready).
        ${local.failure_effect}

        * The entries: `kubectl -n ${var.scheduler_namespace} logs deployment/${var.scheduler_name} -c identity-proxy`, or Logs Explorer `${local.identity_proxy_log_filter}`; `failure` says which kind, `problem` why.
        * no_id_token: Workload Identity in effect? The node pool must run the GKE metadata server, the Kubernetes ServiceAccount ${var.scheduler_namespace}/${var.scheduler_name} must carry `iam.gke.io/gcp-service-account`, and the proxy's service account must grant it `roles/iam.workloadIdentityUser`.
        * refused (401/403): see the iam_refused alert; unreachable / timeout: the cluster's egress to the function's URL.
      EOT
    }
    pending_pods = {
      display_name = "pods not placed: the second scheduler unavailable, or pods unschedulable"
      promql       = local.pending_pods_query
      duration     = local.pending_pods_duration
      threshold    = null
      runbook      = <<-EOT
        For ${var.alert_window_minutes * 2} min, read from kube state metrics (GKE's package, Managed Service for Prometheus): the second scheduler, Deployment ${var.scheduler_namespace}/${var.scheduler_name}, had no available replica, so no pod with `schedulerName: ${var.scheduler_name}` is placed; or its series are absent (the kube state metrics package is not enabled: `gcloud container clusters update CLUSTER --monitoring=SYSTEM,POD,DEPLOYMENT`; or the Deployment does not exist); or pods were unschedulable (PodScheduled False, reason Unschedulable). kube state metrics does not tell which scheduler a pod waits for: the unschedulable count is every scheduler's.

        * `kubectl -n ${var.scheduler_namespace} get deployment ${var.scheduler_name}` and its pods' events; a pod 1/2 ready: the identity proxy cannot mint tokens (see its alert).
        * Which pods, and why: `kubectl get events -A --field-selector reason=FailedScheduling` (the source names the scheduler; the message, the extender's reasons).
        * Pods waiting on the extender's rules: the rejections chart and the skipped alert; a NodeLoad rule rejecting every node keeps pods pending by design.
      EOT
    }
  }
  cluster_alerts = {
    for name, alert in local.cluster_alert_definitions : name => alert
    if var.monitoring_enabled && (name != "identity_proxy_failures" || var.invocation == "iam") && (name != "pending_pods" || var.scheduler_name != "default-scheduler")
  }
}

resource "google_monitoring_alert_policy" "cluster" {
  for_each = local.cluster_alerts

  project               = local.cluster_project_id
  display_name          = "${var.function_name}: ${each.value.display_name}"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  conditions {
    display_name = each.value.display_name

    dynamic "condition_threshold" {
      for_each = each.value.threshold == null ? [] : [each.value.threshold]
      content {
        filter          = condition_threshold.value.filter
        comparison      = "COMPARISON_GT"
        threshold_value = var.alert_error_count - 1
        duration        = each.value.duration

        aggregations {
          alignment_period     = local.alert_window
          per_series_aligner   = "ALIGN_SUM"
          cross_series_reducer = "REDUCE_SUM"
          group_by_fields      = condition_threshold.value.group_by
        }
        trigger {
          count = 1
        }
      }
    }
    dynamic "condition_prometheus_query_language" {
      for_each = each.value.promql == null ? [] : [each.value.promql]
      content {
        query    = condition_prometheus_query_language.value
        duration = each.value.duration
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "kube-scheduler `${var.scheduler_name}` calls the extender `${var.function_name}`${var.invocation == "iam" ? " through the identity proxy beside it" : ""}.\n\n${each.value.runbook}"
  }

  depends_on = [time_sleep.metrics_propagation]
}
