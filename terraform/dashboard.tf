# A Cloud Monitoring dashboard of the extender: kube-scheduler's calls and what they got, how long they took against
# its httpTimeout, what the policy rejected (and would reject), errors, and the Cloud Run instances serving it. The
# function's charts read monitoring.tf's log-based metrics; the others read Cloud Run's own metrics.

locals {
  # kube-scheduler's httpTimeout in ms: the line the latency charts are drawn against.
  dashboard_timeout_ms = module.scheduler_config.http_timeout_ms

  # The metrics the charts read: the module's log-based metrics, and Cloud Run's built-in ones.
  dashboard_user_metric = {
    for name in ["requests", "errors", "unauthenticated", "iam_refused", "latency", "rejections", "would_reject", "skipped", "source_failures"] :
    name => "metric.type=\"logging.googleapis.com/user/${var.function_name}/${name}\" AND resource.type=\"cloud_run_revision\""
  }
  dashboard_cloud_run_metric = {
    for name in ["request_count", "request_latencies", "container/instance_count", "container/startup_latencies"] :
    name => "metric.type=\"run.googleapis.com/${name}\" AND ${local.cloud_run_filter}"
  }
  # The identity proxy logs in the cluster's project: its metric is charted when that is the dashboard's project (its
  # alert, in the cluster's project, fires either way).
  dashboard_cluster_charted = local.cluster_project_id == var.project_id
  dashboard_proxy_charted   = var.invocation == "iam" && local.dashboard_cluster_charted
  dashboard_latency_thresholds = [
    { label = "httpTimeout ${var.http_timeout}: the scheduler gives up", value = local.dashboard_timeout_ms, color = "RED", direction = "ABOVE", targetAxis = "Y1" },
    { label = "latency alerts (p99)", value = local.latency_threshold_ms, color = "YELLOW", direction = "ABOVE", targetAxis = "Y1" },
  ]

  # Each chart: its lines (or bars), each a metric's filter, how its points are aligned per minute (ALIGN_RATE: per
  # second; ALIGN_DELTA: a distribution, of which a percentile is taken) and reduced across series, grouped by which of
  # the metric's labels (`by`), and the legend; the threshold lines drawn across it. Laid out two to a row.
  dashboard_charts = concat([
    {
      title      = "Calls per verb and status (per second)"
      unit       = "calls/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = [{
        filter = local.dashboard_user_metric.requests, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["verb", "status"]
        legend = "$${metric.labels.verb} $${metric.labels.status}"
      }]
    },
    {
      title      = "Errors: failed calls, by verb (the function) and code (Cloud Run)"
      unit       = "calls/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = concat(
        [
          {
            filter = local.dashboard_user_metric.errors, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["verb"]
            legend = "error answered: $${metric.labels.verb}"
          },
          {
            filter  = "${local.dashboard_cloud_run_metric.request_count} AND metric.label.response_code_class=\"5xx\""
            aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["response_code"]
            legend  = "Cloud Run $${metric.labels.response_code}"
          },
          {
            filter  = "${local.dashboard_cloud_run_metric.request_count} AND metric.label.response_code_class=\"4xx\" AND NOT metric.label.response_code=one_of(${local.cloud_run_refused_codes})"
            aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["response_code"]
            legend  = "Cloud Run $${metric.labels.response_code}"
          },
        ],
        local.caller_token_enabled ? [{
          filter  = "${local.dashboard_user_metric.unauthenticated} AND metric.label.method=\"POST\" AND metric.label.verb_path=one_of(\"filter\", \"prioritize\", \"preempt\", \"bind\")"
          aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["verb_path"]
          legend  = "no valid caller token: $${metric.labels.verb_path}"
        }] : [],
        var.invocation == "iam" ? [{
          filter = local.dashboard_user_metric.iam_refused, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["status", "verb"]
          legend = "refused by IAM $${metric.labels.status}: $${metric.labels.verb}"
        }] : [],
      )
    },
    {
      title      = "Time in the function per verb: p50 and p99 (ms)"
      unit       = "ms"
      plot       = "LINE"
      thresholds = local.dashboard_latency_thresholds
      lines = [for percentile in [50, 99] : {
        filter = local.dashboard_user_metric.latency, aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_${percentile}", by = ["verb"]
        legend = "p${percentile} $${metric.labels.verb}"
      }]
    },
    {
      title      = "Latency as Cloud Run measures it, queueing and cold starts included: p50 and p99 (ms)"
      unit       = "ms"
      plot       = "LINE"
      thresholds = local.dashboard_latency_thresholds
      lines = [for percentile in [50, 99] : {
        filter = local.dashboard_cloud_run_metric.request_latencies, aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_${percentile}", by = []
        legend = "p${percentile}"
      }]
    },
    {
      title      = "Rejections: calls in which a rule rejected (or vetoed) nodes, per plugin and rule"
      unit       = "calls/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = [{
        filter = local.dashboard_user_metric.rejections, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["plugin", "rule"]
        legend = "$${metric.labels.plugin} $${metric.labels.rule}"
      }]
    },
    {
      title      = "Audited rules (enforcement: Audit): calls in which they would have rejected or vetoed nodes"
      unit       = "calls/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = [{
        filter = local.dashboard_user_metric.would_reject, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["plugin", "rule", "verdict"]
        legend = "$${metric.labels.plugin} $${metric.labels.rule} ($${metric.labels.verdict})"
      }]
    },
    {
      title      = "Rules not evaluated (skipped): calls in which a plugin did not judge nodes, per plugin, rule and code (Success: passed unjudged)"
      unit       = "calls/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = [{
        filter = local.dashboard_user_metric.skipped, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["plugin", "rule", "code"]
        legend = "$${metric.labels.plugin} $${metric.labels.rule} ($${metric.labels.code})"
      }]
    },
    {
      title      = "Sources failing: WARNINGs about Prometheus, Cloud Monitoring, the Kubernetes API${local.dashboard_proxy_charted ? "; the identity proxy's own failures" : ""}"
      unit       = "warnings/s"
      plot       = "STACKED_BAR"
      thresholds = []
      lines = concat(
        [{
          filter = local.dashboard_user_metric.source_failures, aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["source"]
          legend = "$${metric.labels.source}"
        }],
        local.dashboard_proxy_charted ? [{
          filter  = "metric.type=\"logging.googleapis.com/user/${var.function_name}/identity_proxy_failures\" AND resource.type=\"k8s_container\""
          aligner = "ALIGN_RATE", reducer = "REDUCE_SUM", by = ["failure"]
          legend  = "identity proxy: $${metric.labels.failure}"
        }] : [],
      )
    },
    ],
    # Read with PromQL from kube state metrics (GKE's package), in the cluster's project: charted when that is the
    # dashboard's, and only where the module deploys the second scheduler (as the pending_pods alert).
    local.dashboard_cluster_charted && var.scheduler_name != "default-scheduler" ? [{
      title      = "Pods not placed (kube state metrics): unschedulable pods of every scheduler, and ${var.scheduler_name}'s available replicas"
      unit       = "pods"
      plot       = "LINE"
      thresholds = []
      lines = [
        { promql = "sum(kube_pod_status_unschedulable)", legend = "unschedulable pods" },
        { promql = "sum(kube_deployment_status_replicas_available{${local.scheduler_deployment}})", legend = "${var.scheduler_name}: available replicas" },
      ]
    }] : [],
    [
      {
        title = "Cloud Run instances, serving (active) or idle"
        unit  = "instances"
        plot  = "STACKED_AREA"
        thresholds = [
          { label = "max_instance_count: calls beyond it wait, or get 429", value = var.max_instance_count, color = "RED", direction = "ABOVE", targetAxis = "Y1" },
        ]
        lines = [{
          filter = local.dashboard_cloud_run_metric["container/instance_count"], aligner = "ALIGN_MAX", reducer = "REDUCE_SUM", by = ["state"]
          legend = "$${metric.labels.state}"
        }]
      },
      {
        title      = "Cold starts: time to start an instance, p50 and p99 (ms; a point in each minute with one)"
        unit       = "ms"
        plot       = "LINE"
        thresholds = slice(local.dashboard_latency_thresholds, 0, 1)
        lines = [for percentile in [50, 99] : {
          filter = local.dashboard_cloud_run_metric["container/startup_latencies"], aligner = "ALIGN_DELTA", reducer = "REDUCE_PERCENTILE_${percentile}", by = []
          legend = "p${percentile}"
        }]
      },
  ])

  dashboard_about = <<-EOT
    **${var.function_name}** answers kube-scheduler's calls (${join(", ", var.verbs)}) while the scheduler waits: at most httpTimeout **${var.http_timeout}** each, the red line on the latency charts (the yellow one is where the latency alerts fire). ${local.failure_effect}

    Rates are per second. The function's charts read its decision log through log-based metrics (`logging.googleapis.com/user/${var.function_name}/...`); the Cloud Run charts read Cloud Run's own metrics, which also count calls that never reached the function. Each decision: Logs Explorer, `${local.decision_log_filter}`.
  EOT

  # The API leaves out what is zero or empty (a tile's position 0, a chart without thresholds or grouping): so is it
  # here, or every plan would show the dashboard changed. `{ for ... if ... }` keeps an attribute only when it is set.
  dashboard = {
    displayName = "${var.function_name}: kube-scheduler extender"
    mosaicLayout = {
      columns = 48
      tiles = concat(
        [{ width = 48, height = 7, widget = { title = "About this dashboard", text = { content = local.dashboard_about, format = "MARKDOWN" } } }],
        [for index, chart in local.dashboard_charts : merge(
          { for axis, position in { xPos = 24 * (index % 2), yPos = 7 + 16 * floor(index / 2) } : axis => position if position != 0 },
          {
            width  = 24
            height = 16
            widget = {
              title = chart.title
              xyChart = merge(
                {
                  dataSets = [for line in chart.lines : {
                    plotType           = chart.plot
                    targetAxis         = "Y1"
                    minAlignmentPeriod = "60s"
                    legendTemplate     = line.legend
                    # A line is a PromQL query (``promql``) or a metric's filter with its aggregation; the two shapes
                    # differ, so the conditional chooses between their JSON.
                    timeSeriesQuery = jsondecode(try(line.promql, null) != null ? jsonencode({ prometheusQuery = try(line.promql, null) }) : jsonencode({
                      timeSeriesFilter = {
                        filter = try(line.filter, null)
                        aggregation = merge(
                          { alignmentPeriod = "60s", perSeriesAligner = try(line.aligner, null), crossSeriesReducer = try(line.reducer, null) },
                          { for key, fields in { groupByFields = [for label in try(line.by, []) : "metric.label.\"${label}\""] } : key => fields if length(fields) > 0 },
                        )
                      }
                    }))
                  }]
                  yAxis = { label = chart.unit, scale = "LINEAR" }
                },
                { for key, lines in { thresholds = chart.thresholds } : key => lines if length(lines) > 0 },
              )
            }
          },
        )],
      )
    }
  }
}

resource "google_monitoring_dashboard" "extender" {
  count = var.monitoring_enabled && var.dashboard_enabled ? 1 : 0

  project        = var.project_id
  dashboard_json = jsonencode(local.dashboard)

  # The metrics its charts read (a chart of a metric not created yet stays empty until it is).
  depends_on = [
    google_logging_metric.requests,
    google_logging_metric.errors,
    google_logging_metric.unauthenticated,
    google_logging_metric.iam_refused,
    google_logging_metric.latency,
    google_logging_metric.by_rule,
    google_logging_metric.source_failures,
    google_logging_metric.identity_proxy_failures,
  ]
}
