variable "url" {
  description = "Base URL of the extender function (the Cloud Run `run.app` URI). kube-scheduler appends the caller token, the profile and `/<verb>` to it."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^https?://[^/?#[:space:]]+(/[^?#[:space:]]*)?$", var.url))
    error_message = "url must be an http(s) URL without query string or fragment: kube-scheduler appends \"/<verb>\" to it verbatim, so a query string would swallow the verb."
  }
  validation {
    condition     = startswith(var.url, "https://") || can(regex("^http://(localhost|127(\\.[0-9]{1,3}){3}|\\[::1\\])(:[0-9]+)?(/|$)", var.url))
    error_message = "url must use https unless it points at a loopback address: the scheduler sends every pod spec (and the caller token) in the request."
  }
}

variable "caller_token" {
  description = "Secret path segment placed right after the URL (`<url>/<token>/<verb>`). The function rejects calls without it. null leaves it out."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.caller_token == null || can(regex("^[A-Za-z0-9._~-]{32,}$", var.caller_token))
    error_message = "caller_token must be at least 32 URL-safe characters (A-Z a-z 0-9 . _ ~ -): it is a credential that travels in the URL path."
  }
}

variable "profile" {
  description = "Extender policy profile served by the function, as the path segment before the verb. null calls the default profile."
  type        = string
  default     = null

  validation {
    condition     = var.profile == null || can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.profile))
    error_message = "profile must be a DNS label (lowercase letters, digits, '-', at most 63), like the policy's profile names: it becomes a URL path segment."
  }
  validation {
    condition     = !contains(["filter", "prioritize", "preempt", "bind", "healthz"], coalesce(var.profile, "-"))
    error_message = "profile must not be a verb name (filter, prioritize, preempt, bind, healthz): the function routes on the last path segments."
  }
}

variable "verbs" {
  description = "Verbs the scheduler calls: any of filter, prioritize, preempt, bind. bind makes the function create the Binding itself (only one extender may bind)."
  type        = set(string)
  default     = ["filter", "prioritize"]
  nullable    = false

  validation {
    condition     = length(var.verbs) > 0 && alltrue([for v in var.verbs : contains(["filter", "prioritize", "preempt", "bind"], v)])
    error_message = "verbs must be a non-empty subset of filter, prioritize, preempt, bind."
  }
}

variable "weight" {
  description = "Multiplier of the function's prioritize scores (each counts score x weight x 10 towards the node total). Only emitted with the prioritize verb."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = floor(var.weight) == var.weight
    error_message = "weight must be a whole number: kube-scheduler decodes it as int64."
  }
  validation {
    condition     = !contains(var.verbs, "prioritize") || var.weight > 0
    error_message = "weight must be positive when the prioritize verb is on (kube-scheduler: \"must have a positive weight applied to it\")."
  }
}

variable "http_timeout" {
  description = "Go duration string for the whole exchange of one call (e.g. \"5s\", \"1500ms\"). There is no retry: a filter timeout fails that scheduling attempt."
  type        = string
  default     = "5s"
  nullable    = false

  validation {
    condition     = can(regex("^(${local.duration_component})+$", var.http_timeout))
    error_message = "http_timeout must be a Go duration string such as \"5s\", \"1500ms\" or \"1m30s\" (kube-scheduler rejects a bare number)."
  }
  validation {
    # Components are unsigned (a leading "-" fails the format check above), so any non-zero digit makes it positive.
    condition     = can(regex("[1-9]", var.http_timeout))
    error_message = "http_timeout must be positive: kube-scheduler silently turns 0 into 5s, and a negative value would disable the timeout."
  }
}

variable "ignorable" {
  description = "true: scheduling goes on without the extender when it errs or is unreachable. false: a failing extender fails the scheduling attempt (the policy is a hard constraint)."
  type        = bool
  default     = false
  nullable    = false
}

variable "node_cache_capable" {
  description = "true: the scheduler sends node names only and the function looks nodes up itself (small requests). false: full Node objects in every request."
  type        = bool
  default     = true
  nullable    = false
}

variable "managed_resources" {
  description = "Extended resources (e.g. `example.com/gpu`) that route pods to the extender: when non-empty, only pods requesting one of them are sent. ignored_by_scheduler skips the scheduler's own fit check for that resource."
  type = list(object({
    name                 = string
    ignored_by_scheduler = optional(bool, false)
  }))
  default  = []
  nullable = false

  validation {
    condition = alltrue([for r in var.managed_resources : can(regex(
      "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$", r.name
      )) && try(length(split("/", r.name)[0]) <= 244 && length(split("/", r.name)[1]) <= 63, false)
    ])
    error_message = "managed_resources[*].name is an invalid extended resource name: it needs a DNS domain prefix and a name of at most 63 characters, e.g. \"example.com/gpu\"."
  }
  validation {
    condition     = alltrue([for r in var.managed_resources : !strcontains(r.name, "kubernetes.io/")])
    error_message = "managed_resources[*].name is an invalid extended resource name: names containing \"kubernetes.io/\" are native resources."
  }
  validation {
    condition     = length(distinct([for r in var.managed_resources : r.name])) == length(var.managed_resources)
    error_message = "managed_resources has a duplicate extender managed resource name."
  }
}

variable "tls" {
  description = "TLS towards an https url. Default {}: verify the server against the scheduler's system roots. ca_data (base64 of a PEM bundle) or ca_file: verify against that CA only. cert_data/cert_file with tls_key_data/key_file: client certificate (mTLS). insecure = true: no verification, only when asked for."
  type = object({
    ca_data     = optional(string)
    ca_file     = optional(string)
    server_name = optional(string)
    cert_data   = optional(string)
    cert_file   = optional(string)
    key_file    = optional(string)
    insecure    = optional(bool, false)
  })
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for pem in [var.tls.ca_data, var.tls.cert_data] : pem == null || can(regex("-----BEGIN CERTIFICATE-----\\r?\\n[A-Za-z0-9+/=\\r\\n]+-----END CERTIFICATE-----", base64decode(pem)))])
    error_message = "tls.ca_data and tls.cert_data must be base64 of PEM certificates (e.g. filebase64(\"ca.pem\")): kube-scheduler decodes them as []byte."
  }
  validation {
    condition     = var.tls.ca_data == null || var.tls.ca_file == null
    error_message = "tls: set ca_data or ca_file, not both (kube-scheduler silently ignores ca_file then)."
  }
  validation {
    condition     = !var.tls.insecure || (var.tls.ca_data == null && var.tls.ca_file == null)
    error_message = "tls: insecure cannot be combined with a CA (client-go refuses \"specifying a root certificates file with the insecure flag\")."
  }
  validation {
    condition     = (var.tls.cert_data == null && var.tls.cert_file == null) == (var.tls_key_data == null && var.tls.key_file == null)
    error_message = "tls: a client certificate (cert_data/cert_file) needs its key (tls_key_data/key_file) and vice versa; client-go silently drops a half pair."
  }
  validation {
    condition     = (var.tls.cert_data == null || var.tls.cert_file == null) && (var.tls_key_data == null || var.tls.key_file == null)
    error_message = "tls: set the client certificate and key either as data or as files, not both (the data silently wins)."
  }
  validation {
    condition = (startswith(var.url, "https://") && var.identity_proxy == null) || (
      !var.tls.insecure && alltrue([for v in [var.tls.ca_data, var.tls.ca_file, var.tls.server_name, var.tls.cert_data, var.tls.cert_file, var.tls.key_file, var.tls_key_data] : v == null])
    )
    error_message = "tls settings only apply when the scheduler itself calls an https url; with an http url or the identity proxy they would be ignored."
  }
  validation {
    condition     = alltrue([for v in [var.tls.ca_file, var.tls.cert_file, var.tls.key_file] : v == null || startswith(coalesce(v, "-"), "/")])
    error_message = "tls file paths must be absolute paths on the scheduler's host or container."
  }
  validation {
    condition     = var.scheduler_deployment == "existing-scheduler" || alltrue([for v in [var.tls.ca_file, var.tls.cert_file, var.tls.key_file] : v == null])
    error_message = "tls.ca_file, tls.cert_file and tls.key_file are files on a host, which the second scheduler's pod (kubernetes_manifests) does not mount: kube-scheduler would exit at start. Give them as data: tls.ca_data, tls.cert_data and tls_key_data (filebase64(\"ca.pem\")), or set scheduler_deployment = \"existing-scheduler\" for a kube-scheduler you start with --config on that host."
  }
}

variable "tls_key_data" {
  description = "Client private key for mTLS, base64 of PEM (e.g. filebase64(\"client.key\")), paired with tls.cert_data. Kept apart from tls so that it stays sensitive."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.tls_key_data == null || can(regex("-----BEGIN ([A-Z]+ )?PRIVATE KEY-----\\r?\\n[A-Za-z0-9+/=\\r\\n]+-----END ([A-Z]+ )?PRIVATE KEY-----", base64decode(var.tls_key_data)))
    error_message = "tls_key_data must be base64 of a PEM private key (e.g. filebase64(\"client.key\"))."
  }
}

variable "scheduler_name" {
  description = "schedulerName of the profile; pods opt in with spec.schedulerName. Also names the second scheduler's Kubernetes objects. Use \"default-scheduler\" (with scheduler_deployment = \"existing-scheduler\") to put the extender on the cluster's existing scheduler."
  type        = string
  default     = "extender-scheduler"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.scheduler_name)) && length(var.scheduler_name) <= 40
    error_message = "scheduler_name must be a lowercase DNS label of at most 40 characters (object names append suffixes to it)."
  }
  validation {
    condition     = var.scheduler_name != "default-scheduler" || var.scheduler_deployment == "existing-scheduler"
    error_message = "scheduler_name = \"default-scheduler\" would make the second scheduler (kubernetes_manifests) race the cluster's own scheduler for every pod that names none: keep a name of its own (pods opt in with spec.schedulerName), or set scheduler_deployment = \"existing-scheduler\" to give the configuration to the cluster's scheduler with --config."
  }
}

variable "percentage_of_nodes_to_score" {
  description = "Share of feasible nodes the scheduler looks for before it stops (0-100), set on the extender's profile (on the whole configuration before Kubernetes 1.27). 100 shows the extender every feasible node; null keeps the scheduler's adaptive default (5-50% on large clusters). Must be null with scheduler_name = \"default-scheduler\"."
  type        = number
  default     = 100

  validation {
    condition     = var.percentage_of_nodes_to_score == null || try(floor(var.percentage_of_nodes_to_score) == var.percentage_of_nodes_to_score && var.percentage_of_nodes_to_score >= 0 && var.percentage_of_nodes_to_score <= 100, false)
    error_message = "percentage_of_nodes_to_score must be a whole number in [0-100] (kube-scheduler: \"not in valid range [0-100]\")."
  }
  validation {
    condition     = var.scheduler_name != "default-scheduler" || var.percentage_of_nodes_to_score == null
    error_message = "percentage_of_nodes_to_score with scheduler_name = \"default-scheduler\" changes how the cluster's default scheduler scores every pod, not only the extender's: set it to null there."
  }
}

variable "namespace" {
  description = "Namespace of the second scheduler's objects and of its leader-election Lease."
  type        = string
  default     = "kube-system"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.namespace)) && length(var.namespace) <= 63
    error_message = "namespace must be a DNS label."
  }
}

variable "leader_election_lease_name" {
  description = "Name of the leader-election Lease. null uses scheduler_name, so the second scheduler never contends for the default scheduler's \"kube-scheduler\" lock. Set \"kube-scheduler\" when the config goes to the existing scheduler (scheduler_deployment = \"existing-scheduler\")."
  type        = string
  default     = null

  validation {
    condition     = var.leader_election_lease_name == null || can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", var.leader_election_lease_name))
    error_message = "leader_election_lease_name must be a DNS subdomain name."
  }
  validation {
    condition     = var.scheduler_deployment == "existing-scheduler" || var.namespace != "kube-system" || var.leader_election_lease_name != "kube-scheduler"
    error_message = "leader_election_lease_name = \"kube-scheduler\" in kube-system is the cluster's own scheduler's lock: the second scheduler (kubernetes_manifests) would take turns with it. Leave it null (the lock is then named after scheduler_name), or set scheduler_deployment = \"existing-scheduler\" when the configuration goes to that scheduler."
  }
}

variable "scheduler_deployment" {
  description = "Which kube-scheduler runs the configuration. \"second-scheduler\": a Deployment of its own (the kubernetes_manifests output), with in-cluster credentials; pods opt in with spec.schedulerName. \"existing-scheduler\": a kube-scheduler you run and start with --config (the kube_scheduler_configuration output), such as a self-managed control plane's; kubernetes_manifests is null then."
  type        = string
  default     = "second-scheduler"
  nullable    = false

  validation {
    condition     = contains(["second-scheduler", "existing-scheduler"], var.scheduler_deployment)
    error_message = "scheduler_deployment must be \"second-scheduler\" (a Deployment from kubernetes_manifests) or \"existing-scheduler\" (kube_scheduler_configuration for a kube-scheduler you start with --config)."
  }
}

variable "kubeconfig" {
  description = "clientConnection.kubeconfig, with scheduler_deployment = \"existing-scheduler\" only: with --config, kube-scheduler ignores its --kubeconfig flag, so a control-plane scheduler needs it here (kubeadm: /etc/kubernetes/scheduler.conf). null: in-cluster credentials, which the second scheduler always uses."
  type        = string
  default     = null

  validation {
    condition     = var.kubeconfig == null || startswith(coalesce(var.kubeconfig, "-"), "/")
    error_message = "kubeconfig must be an absolute path."
  }
  validation {
    condition     = var.kubeconfig == null || var.scheduler_deployment == "existing-scheduler"
    error_message = "kubeconfig = \"${coalesce(var.kubeconfig, "-")}\" is a file on a control-plane host, which the second scheduler's pod (kubernetes_manifests) does not mount: kube-scheduler would exit at start. The pod authenticates with its ServiceAccount (in-cluster credentials): set kubeconfig = null. To give the configuration to a kube-scheduler you start with --config instead, set scheduler_deployment = \"existing-scheduler\" and use kube_scheduler_configuration."
  }
}

variable "kubernetes_version" {
  description = "Kubernetes version of the cluster as the control plane reports it: \"1.31.4\", \"v1.31.4\" or GKE's \"1.31.4-gke.1200\". Its X.Y.Z tags the kube-scheduler image (scheduler_image_repository:vX.Y.Z); the scheduler must not be newer than the API server."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^v?1\\.(2[5-9]|[3-9][0-9])\\.[0-9]+([-+][0-9A-Za-z.-]+)?$", var.kubernetes_version))
    error_message = "kubernetes_version \"${var.kubernetes_version}\" must be X.Y.Z, vX.Y.Z or GKE's X.Y.Z-gke.N (e.g. \"1.31.4\", \"v1.31.4\", \"1.31.4-gke.1200\"), at least 1.25 (kubescheduler.config.k8s.io/v1)."
  }
}

variable "scheduler_image_repository" {
  description = "Repository of the second scheduler's image, tagged v<X.Y.Z of kubernetes_version>: an upgrade changes kubernetes_version only. Set a mirror for clusters without access to registry.k8s.io (an Artifact Registry remote repository of it)."
  type        = string
  default     = "registry.k8s.io/kube-scheduler"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]", var.scheduler_image_repository)) && !can(regex(":[^/]*$|@", var.scheduler_image_repository))
    error_message = "scheduler_image_repository \"${var.scheduler_image_repository}\" must be a repository without tag or digest, e.g. us-central1-docker.pkg.dev/my-project/registry-k8s-io/kube-scheduler: the tag comes from kubernetes_version (set scheduler_image for a fixed image)."
  }
}

variable "scheduler_image" {
  description = "Image of the second scheduler, overriding scheduler_image_repository and the tag kubernetes_version gives (e.g. to pin a digest). null: scheduler_image_repository:v<X.Y.Z of kubernetes_version>. A tag of another version than kubernetes_version is warned about at plan."
  type        = string
  default     = null
}

variable "replicas" {
  description = "Replicas of the second scheduler. Leader election keeps one active; a second one takes over within seconds when a node fails."
  type        = number
  default     = 2
  nullable    = false

  validation {
    condition     = floor(var.replicas) == var.replicas && var.replicas >= 1
    error_message = "replicas must be a whole number of at least 1."
  }
}

variable "resources" {
  description = "Resources of the scheduler container. Memory grows with the cluster: the scheduler caches every node and pod."
  type = object({
    requests = optional(map(string), { cpu = "100m", memory = "256Mi" })
    limits   = optional(map(string), { memory = "1Gi" })
  })
  default  = {}
  nullable = false
}

variable "identity_proxy" {
  description = "IAM-only invocation: run `python -m extender proxy` as a sidecar that adds a Google identity token, and point the scheduler at it (http://127.0.0.1:<port>). google_service_account is annotated on the Kubernetes ServiceAccount for Workload Identity. null: the scheduler calls url directly."
  type = object({
    image                  = string
    port                   = optional(number, 8001)
    google_service_account = optional(string)
  })
  default = null

  validation {
    condition     = var.identity_proxy == null || try(length(var.identity_proxy.image) > 0, false)
    error_message = "identity_proxy.image must name the image holding the extender package."
  }
  validation {
    condition     = var.identity_proxy == null || try(floor(var.identity_proxy.port) == var.identity_proxy.port && var.identity_proxy.port >= 1024 && var.identity_proxy.port <= 65535 && var.identity_proxy.port != 10259, false)
    error_message = "identity_proxy.port must be an unprivileged port (1024-65535) other than 10259, the scheduler's own secure port in the same pod."
  }
  validation {
    condition     = var.identity_proxy == null || startswith(var.url, "https://")
    error_message = "identity_proxy needs an https url: the proxy forwards to the function over TLS."
  }
}
