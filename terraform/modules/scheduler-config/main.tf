locals {
  # kubernetes_version as the control plane reports it (1.31.4, v1.31.4, GKE's 1.31.4-gke.1200): X.Y.Z and the minor.
  kubernetes_release = regex("^v?([0-9]+\\.[0-9]+\\.[0-9]+)", var.kubernetes_version)[0]
  kubernetes_minor   = tonumber(split(".", local.kubernetes_release)[1])

  # One element of a Go duration ("1.5s", "300ms"); time.ParseDuration accepts a run of them ("1m30s").
  duration_component = "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)"
  duration_unit_ms   = { ns = 0.000001, us = 0.001, "µs" = 0.001, "μs" = 0.001, ms = 1, s = 1000, m = 60000, h = 3600000 }
  http_timeout_ms = sum([
    for part in regexall(local.duration_component, var.http_timeout) : tonumber(part[0]) * local.duration_unit_ms[part[2]]
  ])

  # With the identity proxy the scheduler talks plain HTTP to its sidecar, which holds the Google credentials.
  url_base   = var.identity_proxy == null ? trimsuffix(var.url, "/") : "http://127.0.0.1:${var.identity_proxy.port}"
  url_prefix = join("/", compact([local.url_base, var.caller_token, var.profile]))

  # enableHTTPS without a CA makes kube-scheduler skip certificate verification, so it is only emitted next to a CA or an
  # explicit insecure. An https urlPrefix with enableHTTPS false is verified against the system roots.
  scheduler_uses_https = startswith(local.url_base, "https://")
  has_ca               = var.tls.ca_data != null || var.tls.ca_file != null
  tls_verification = (
    !local.scheduler_uses_https ? "plaintext-loopback" :
    var.tls.insecure ? "insecure" :
    local.has_ca ? "ca" : "system-roots"
  )
  tls_config = { for key, value in {
    insecure   = var.tls.insecure ? true : null
    serverName = var.tls.server_name
    caData     = var.tls.ca_data
    caFile     = var.tls.ca_file
    certData   = var.tls.cert_data
    certFile   = var.tls.cert_file
    keyData    = var.tls_key_data
    keyFile    = var.tls.key_file
  } : key => value if value != null }

  # Objects below are written as `{ for key, value in {...} : key => value if value != null }`: absent fields are left out,
  # since kube-scheduler decodes strictly and Terraform cannot unify objects with different attributes in a conditional.
  # Field names and shapes are those of KubeSchedulerConfiguration v1 (k8s.io/kube-scheduler/config/v1).
  extender = { for key, value in {
    urlPrefix        = local.url_prefix
    filterVerb       = contains(var.verbs, "filter") ? "filter" : null
    prioritizeVerb   = contains(var.verbs, "prioritize") ? "prioritize" : null
    preemptVerb      = contains(var.verbs, "preempt") ? "preempt" : null
    bindVerb         = contains(var.verbs, "bind") ? "bind" : null
    weight           = contains(var.verbs, "prioritize") ? var.weight : null
    enableHTTPS      = local.scheduler_uses_https && (local.has_ca || var.tls.insecure)
    tlsConfig        = length(local.tls_config) > 0 ? local.tls_config : null
    httpTimeout      = var.http_timeout
    nodeCacheCapable = var.node_cache_capable
    ignorable        = var.ignorable
    managedResources = length(var.managed_resources) > 0 ? [
      for resource in var.managed_resources : { name = resource.name, ignoredByScheduler = resource.ignored_by_scheduler }
    ] : null
  } : key => value if value != null }

  lease_name = coalesce(var.leader_election_lease_name, var.scheduler_name)

  # Since 1.27 a profile carries its own percentageOfNodesToScore, so the setting changes the extender's profile only,
  # never other profiles of the same scheduler.
  profile_has_percentage = local.kubernetes_minor >= 27
  profile = { for key, value in {
    schedulerName            = var.scheduler_name
    percentageOfNodesToScore = local.profile_has_percentage ? var.percentage_of_nodes_to_score : null
  } : key => value if value != null }

  kube_scheduler_configuration = { for key, value in {
    apiVersion = "kubescheduler.config.k8s.io/v1"
    kind       = "KubeSchedulerConfiguration"
    leaderElection = {
      leaderElect       = true
      resourceLock      = "leases"
      resourceName      = local.lease_name
      resourceNamespace = var.namespace
    }
    clientConnection = var.kubeconfig == null ? null : { kubeconfig = var.kubeconfig }
    # Before 1.27 profiles have no percentageOfNodesToScore (and kube-scheduler decodes strictly): the global one.
    percentageOfNodesToScore = local.profile_has_percentage ? null : var.percentage_of_nodes_to_score
    profiles                 = [local.profile]
    extenders                = [local.extender]
  } : key => value if value != null }
  kube_scheduler_configuration_yaml = yamlencode(local.kube_scheduler_configuration)
}
