# A second kube-scheduler running as a Deployment: GKE does not let users configure its own scheduler, so pods opt in
# with spec.schedulerName instead. Modelled on "Configure Multiple Schedulers" of the Kubernetes documentation.
locals {
  labels = {
    "app.kubernetes.io/name"       = "kube-scheduler"
    "app.kubernetes.io/instance"   = var.scheduler_name
    "app.kubernetes.io/component"  = "scheduler"
    "app.kubernetes.io/managed-by" = "terraform"
  }
  selector_labels = {
    "app.kubernetes.io/name"     = "kube-scheduler"
    "app.kubernetes.io/instance" = var.scheduler_name
  }
  metadata = {
    name      = var.scheduler_name
    namespace = var.namespace
    labels    = local.labels
  }

  scheduler_image = coalesce(var.scheduler_image, "${var.scheduler_image_repository}:v${local.kubernetes_release}")
  # The X.Y.Z of an explicit scheduler_image's tag (vX.Y.Z, perhaps with a suffix or a digest); null for other tags.
  scheduler_image_release = try(regex(":v?([0-9]+\\.[0-9]+\\.[0-9]+)[^/:]*$", split("@", coalesce(var.scheduler_image, "-"))[0])[0], null)

  config_dir  = "/etc/kubernetes/${var.scheduler_name}"
  config_name = "${var.scheduler_name}-config"
  config_data = { "config.yaml" = local.kube_scheduler_configuration_yaml }
  # Whether a token is set is no secret; the token itself is. A configuration holding it lives in a Secret.
  config_in_secret = nonsensitive(var.caller_token != null)

  service_account_subject = { kind = "ServiceAccount", name = var.scheduler_name, namespace = var.namespace }

  container_security_context = {
    allowPrivilegeEscalation = false
    readOnlyRootFilesystem   = true
    capabilities             = { drop = ["ALL"] }
  }
  https_healthz = { httpGet = { path = "/healthz", port = 10259, scheme = "HTTPS" } }

  scheduler_container = {
    name            = "kube-scheduler"
    image           = local.scheduler_image
    command         = ["/usr/local/bin/kube-scheduler", "--config=${local.config_dir}/config.yaml"]
    livenessProbe   = merge(local.https_healthz, { initialDelaySeconds = 15 })
    readinessProbe  = local.https_healthz
    resources       = var.resources
    securityContext = local.container_security_context
    volumeMounts    = [{ name = "config", mountPath = local.config_dir, readOnly = true }]
  }
  # Shares the pod's network namespace: the scheduler reaches it on 127.0.0.1, nothing outside the pod can.
  identity_proxy_containers = var.identity_proxy == null ? [] : [{
    name  = "identity-proxy"
    image = var.identity_proxy.image
    command = [
      "python", "-m", "extender", "proxy",
      "--target", trimsuffix(var.url, "/"),
      "--host", "127.0.0.1",
      "--port", tostring(var.identity_proxy.port),
    ]
    # Kubelet probes reach the pod IP, not loopback: the probes run inside the container. Alive while it listens
    # (a restart mints no token); ready while it can mint an ID token (the proxy answers 503 on its ready path).
    livenessProbe   = merge(local.identity_proxy_probe, { periodSeconds = 20 })
    readinessProbe  = local.identity_proxy_ready_probe
    resources       = { requests = { cpu = "50m", memory = "64Mi" }, limits = { memory = "256Mi" } }
    securityContext = local.container_security_context
  }]
  identity_proxy_probe = var.identity_proxy == null ? null : {
    exec = {
      command = ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', ${var.identity_proxy.port}), 2).close()"]
    }
    timeoutSeconds = 5
  }
  identity_proxy_ready_probe = var.identity_proxy == null ? null : {
    exec = {
      command = ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${var.identity_proxy.port}/identity-proxy/ready', timeout=4).close()"]
    }
    timeoutSeconds = 5
  }

  manifests = concat(
    contains(["kube-system", "default"], var.namespace) ? [] : [{
      apiVersion = "v1"
      kind       = "Namespace"
      metadata = {
        name   = var.namespace
        labels = merge(local.labels, { "pod-security.kubernetes.io/enforce" = "restricted" })
      }
    }],
    [
      {
        apiVersion = "v1"
        kind       = "ServiceAccount"
        metadata = { for key, value in merge(local.metadata, {
          annotations = try(var.identity_proxy.google_service_account, null) == null ? null : {
            "iam.gke.io/gcp-service-account" = var.identity_proxy.google_service_account
          }
        }) : key => value if value != null }
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRoleBinding"
        metadata   = { name = "${var.scheduler_name}-as-kube-scheduler", labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = "system:kube-scheduler" }
        subjects   = [local.service_account_subject]
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "ClusterRoleBinding"
        metadata   = { name = "${var.scheduler_name}-as-volume-scheduler", labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = "system:volume-scheduler" }
        subjects   = [local.service_account_subject]
      },
      {
        # Lets the scheduler's secure port delegate authentication, as the default scheduler does.
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "RoleBinding"
        metadata   = { name = "${var.scheduler_name}-extension-apiserver-authentication-reader", namespace = "kube-system", labels = local.labels }
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "extension-apiserver-authentication-reader" }
        subjects   = [local.service_account_subject]
      },
      {
        # system:kube-scheduler may create any Lease but only get/update the one named "kube-scheduler".
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "Role"
        metadata   = merge(local.metadata, { name = "${var.scheduler_name}-leader-election" })
        rules = [{
          apiGroups     = ["coordination.k8s.io"]
          resources     = ["leases"]
          resourceNames = [local.lease_name]
          verbs         = ["get", "update"]
        }]
      },
      {
        apiVersion = "rbac.authorization.k8s.io/v1"
        kind       = "RoleBinding"
        metadata   = merge(local.metadata, { name = "${var.scheduler_name}-leader-election" })
        roleRef    = { apiGroup = "rbac.authorization.k8s.io", kind = "Role", name = "${var.scheduler_name}-leader-election" }
        subjects   = [local.service_account_subject]
      },
      { for key, value in {
        apiVersion = "v1"
        kind       = local.config_in_secret ? "Secret" : "ConfigMap"
        metadata   = merge(local.metadata, { name = local.config_name })
        type       = local.config_in_secret ? "Opaque" : null
        stringData = local.config_in_secret ? local.config_data : null
        data       = local.config_in_secret ? null : local.config_data
      } : key => value if value != null },
      {
        apiVersion = "apps/v1"
        kind       = "Deployment"
        metadata   = local.metadata
        spec = {
          replicas = var.replicas
          selector = { matchLabels = local.selector_labels }
          template = {
            metadata = {
              labels = local.labels
              # kube-scheduler reads its configuration once: a changed configuration must roll the pods.
              annotations = { "checksum/config" = sha256(local.kube_scheduler_configuration_yaml) }
            }
            spec = { for key, value in {
              serviceAccountName = var.scheduler_name
              priorityClassName  = var.namespace == "kube-system" ? "system-cluster-critical" : null
              securityContext = {
                runAsNonRoot   = true
                runAsUser      = 65532
                runAsGroup     = 65532
                seccompProfile = { type = "RuntimeDefault" }
              }
              affinity = {
                podAntiAffinity = {
                  preferredDuringSchedulingIgnoredDuringExecution = [{
                    weight = 100
                    podAffinityTerm = {
                      topologyKey   = "kubernetes.io/hostname"
                      labelSelector = { matchLabels = local.selector_labels }
                    }
                  }]
                }
              }
              containers = concat([local.scheduler_container], local.identity_proxy_containers)
              # The configuration is the only file mounted: the variables refuse a kubeconfig or TLS file path with the
              # second scheduler, so it authenticates with the ServiceAccount (in-cluster credentials).
              volumes = [{ for key, value in {
                name      = "config"
                secret    = local.config_in_secret ? { secretName = local.config_name } : null
                configMap = local.config_in_secret ? null : { name = local.config_name }
              } : key => value if value != null }]
            } : key => value if value != null }
          }
        }
      },
    ],
  )
  kubernetes_manifests_yaml = join("---\n", [for manifest in local.manifests : yamlencode(manifest)])
}

# One version, one image: an explicit scheduler_image tagged for another release than kubernetes_version is most likely
# left over from before an upgrade. A warning, not a refusal: a mirror may tag as it likes.
check "scheduler_image_matches_kubernetes_version" {
  assert {
    condition     = local.scheduler_image_release == null || local.scheduler_image_release == local.kubernetes_release
    error_message = "scheduler_image ${coalesce(var.scheduler_image, "-")} is tagged v${coalesce(local.scheduler_image_release, "-")}, but kubernetes_version is ${var.kubernetes_version} (v${local.kubernetes_release}): the second scheduler would run another kube-scheduler than the control plane's, which must never be newer. Drop scheduler_image and set scheduler_image_repository to its repository, so that the tag follows kubernetes_version."
  }
  assert {
    condition     = var.scheduler_image == null || var.scheduler_image_repository == "registry.k8s.io/kube-scheduler"
    error_message = "scheduler_image ${coalesce(var.scheduler_image, "-")} and scheduler_image_repository ${var.scheduler_image_repository} are both set: scheduler_image wins and the repository is ignored. Set one of them: the repository alone lets kubernetes_version tag the image."
  }
}
