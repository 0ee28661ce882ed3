# Values derived from inputs that several validations share, and the caller-token slots (kept here: the validations
# and the rotation procedure are tested on this file alone, see tests/terraform/).
locals {
  # Cloud Run takes CPU as a plain number of vCPUs ("1", "0.5") or in millicores ("1000m").
  available_cpus = try(
    endswith(var.available_cpu, "m") ? tonumber(trimsuffix(var.available_cpu, "m")) / 1000 : tonumber(var.available_cpu), -1
  )
  caller_token_enabled = coalesce(var.caller_token_enabled, var.invocation == "public" || nonsensitive(length(var.caller_tokens) > 0))
  direct_vpc_egress    = var.direct_vpc_network != null || var.direct_vpc_subnetwork != null

  # policy_file as a path to read: a relative one from policy_directory (main.tf: the directory Terraform runs in;
  # preflight/: the root module's, so one terraform.tfvars means the same file in both), so that a saved plan reads the
  # same file on a runner with another checkout path. policy_file's validations spell this out: a validation cannot
  # refer to a local derived from its own variable.
  policy_path = var.policy_file == null ? null : can(regex("^(~|([A-Za-z]:)?[/\\\\])", var.policy_file)) ? var.policy_file : "${local.policy_directory}/${var.policy_file}"
  # The policy file as the function reads it (JSON is YAML too); null without one, or when it cannot be read
  # (policy_file's own validation says so).
  policy = var.policy_file == null ? null : try(yamldecode(file(local.policy_path)), null)
  # Profile names the function serves: the embedded default policy has the one profile "default"; null when the
  # policy file cannot be read.
  policy_profiles = var.policy_file == null ? ["default"] : try(compact([for profile in local.policy.profiles : try(tostring(profile.name), null)]), null)
  # The scheduler's nodeCacheCapable as the policy declares it: true, false, or null (not said: both modes served).
  policy_node_cache_capable = try(local.policy.nodeCacheCapable, null)
  # Whether a profile of the policy scores with NodeLoad (scheduler_config.tf warns about a weight too low for it).
  policy_scores_node_load = anytrue([
    for profile in try(local.policy.profiles, []) : anytrue([for entry in try(profile.plugins.score.enabled, []) : try(entry.name == "NodeLoad", false)])
  ])
  # Minor version of kubernetes_version; null when it does not parse (modules/scheduler-config says why).
  kubernetes_minor = try(tonumber(regex("^v?1\\.([0-9]+)\\.", var.kubernetes_version)[0]), null)

  # Caller-token slots (README: "Rotating the caller token"). A slot's token exists while the slot is accepted: adding
  # a slot generates a new token, dropping it destroys the token, so no other input can change a token in use.
  caller_token_slots           = local.caller_token_enabled ? var.caller_token_accepted_slots : toset([])
  generated_caller_token_slots = setsubtract(local.caller_token_slots, nonsensitive(keys(var.caller_tokens)))
  # The function's token variables, by the slot each reads: the active slot's token, which the rendered scheduler
  # configuration carries, and the other slot's while it is accepted too.
  caller_token_secret_slots = { for name, slot in {
    EXTENDER_CALLER_TOKEN          = var.caller_token_active_slot
    EXTENDER_CALLER_TOKEN_PREVIOUS = one(setsubtract(var.caller_token_accepted_slots, [var.caller_token_active_slot]))
  } : name => slot if local.caller_token_enabled && slot != null }

  # Addresses only a VPC routes (what direct VPC egress with VPC_EGRESS_PRIVATE_RANGES_ONLY sends into it): RFC 1918,
  # RFC 6598 shared address space, class E, link-local, IPv6 unique-local and link-local.
  vpc_only_ranges = [
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "240.0.0.0/4", "169.254.0.0/16", "fc00::/7", "fe80::/10",
  ]

  # Whether kubernetes_api_url is an address only a VPC routes (a private cluster endpoint). kubernetes_api_url's
  # validation spells the same test out (a validation cannot refer to a local derived from its own variable).
  kubernetes_api_private = anytrue([
    for host in [try(coalesce(regex("^https://(?:\\[([0-9A-Fa-f:.]+)\\]|([^/:?#]+))", var.kubernetes_api_url)...), "")] :
    anytrue([for range in local.vpc_only_ranges : try(cidrhost("${host}/${split("/", range)[1]}", 0) == cidrhost(range, 0), false)])
  ])

  memory_units = { k = 1000, M = 1000000, G = 1000000000, Mi = 1048576, Gi = 1073741824 }
}

# --- Where and what ----------------------------------------------------------------------------------------------------

variable "project_id" {
  description = "Project that hosts the function, its bucket, secrets, service accounts and monitoring."
  type        = string
  nullable    = false
}

variable "function_location" {
  description = "Region of the function (and of its bucket). Pick the one closest to the cluster's control plane: every call is on the scheduling path."
  type        = string
  nullable    = false
}

variable "function_name" {
  description = "Name of the function (and of its Cloud Run service, service account, secret and metrics)."
  type        = string
  default     = "scheduler-extender"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.function_name))
    error_message = "function_name must be 6-30 lowercase letters, digits or hyphens, starting with a letter: it is also the service account id."
  }
}

variable "labels" {
  description = "Labels for every resource that takes them."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "enable_apis" {
  description = "Enable the Google APIs the module uses. Set false when the project's APIs are managed elsewhere."
  type        = bool
  default     = true
  nullable    = false
}

variable "secret_replica_locations" {
  description = "Regions the caller-token secret is replicated to (user-managed replication), for organisations whose constraints/gcp.resourceLocations excludes global. Empty: automatic replication. Set it before the first apply: Secret Manager cannot change a secret's replication."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for location in var.secret_replica_locations : can(regex("^[a-z]+-[a-z]+[0-9]+$", location))])
    error_message = "secret_replica_locations must be region names such as \"europe-west1\" (Secret Manager replicates to regions, not to multi-regions or zones)."
  }
  validation {
    condition     = length(distinct(var.secret_replica_locations)) == length(var.secret_replica_locations)
    error_message = "secret_replica_locations must not repeat a region."
  }
}

variable "function_service_account_email" {
  description = "Existing service account the function runs as. null: the module creates one (the deployer then needs roles/iam.serviceAccountAdmin). With an existing account the module grants it its secrets only; see \"Deployer's roles\" for what it needs beforehand."
  type        = string
  default     = null

  validation {
    condition     = var.function_service_account_email == null || can(regex("^[a-z0-9-]+@[a-z0-9.-]+\\.gserviceaccount\\.com$", coalesce(var.function_service_account_email, "-")))
    error_message = "function_service_account_email must be a service account's email, e.g. scheduler-extender@my-project.iam.gserviceaccount.com."
  }
}

# --- Invocation: how kube-scheduler reaches the function ---------------------------------------------------------------

variable "invocation" {
  description = "\"public\": roles/run.invoker for allUsers, as kube-scheduler cannot send an identity token; the caller token guards the URL. \"iam\": only IAM principals may call, through the identity proxy sidecar (proxy_image). No default: this is a security decision."
  type        = string
  nullable    = false

  validation {
    condition     = contains(["public", "iam"], var.invocation)
    error_message = "invocation must be \"public\" or \"iam\"."
  }
}

variable "caller_token_enabled" {
  description = "Put a secret token into the URL path that the function checks. null: on for public invocation, off for IAM-only. false with public invocation needs accept_unauthenticated_open_endpoint."
  type        = bool
  default     = null

  validation {
    condition     = !(var.invocation == "public" && var.caller_token_enabled == false) || var.accept_unauthenticated_open_endpoint
    error_message = "invocation = \"public\" with caller_token_enabled = false lets anyone on the internet call every verb (and bind pods, with the bind verb). Keep the token, use invocation = \"iam\", or set accept_unauthenticated_open_endpoint = true to accept an open endpoint."
  }
}

variable "accept_unauthenticated_open_endpoint" {
  description = "Explicit acceptance that the function is open to anyone: required for invocation = \"public\" with caller_token_enabled = false (e.g. behind your own gateway with ingress_settings = \"ALLOW_INTERNAL_AND_GCLB\")."
  type        = bool
  default     = false
  nullable    = false
}

variable "caller_token_accepted_slots" {
  description = "Caller-token slots (\"a\", \"b\") whose tokens the function accepts. A slot's token is generated when the slot is added and destroyed when it is dropped. Rotation: add the other slot, switch caller_token_active_slot to it, re-apply the scheduler configuration, drop the old slot (see \"Rotating the caller token\")."
  type        = set(string)
  default     = ["a"]
  nullable    = false

  validation {
    condition     = length(var.caller_token_accepted_slots) > 0 && length(setsubtract(var.caller_token_accepted_slots, ["a", "b"])) == 0
    error_message = "caller_token_accepted_slots must name one or both of the slots \"a\" and \"b\"."
  }
}

variable "caller_token_active_slot" {
  description = "The slot whose token the rendered scheduler configuration (url_prefix, manifests) carries. It must be accepted: switch only to a slot already in caller_token_accepted_slots, in an apply of its own."
  type        = string
  default     = "a"
  nullable    = false

  validation {
    condition     = contains(["a", "b"], var.caller_token_active_slot)
    error_message = "caller_token_active_slot must be \"a\" or \"b\"."
  }
  validation {
    condition     = contains(var.caller_token_accepted_slots, var.caller_token_active_slot)
    error_message = "caller_token_active_slot \"${var.caller_token_active_slot}\" is not in caller_token_accepted_slots: the schedulers would get a token the function refuses. Add \"${var.caller_token_active_slot}\" to caller_token_accepted_slots and apply first (rotation step 1), then switch; to finish a rotation, drop only the slot that is no longer active."
  }
}

variable "caller_tokens" {
  description = "Tokens of your own, by slot (at least 32 URL-safe characters each); a slot without one gets 48 random alphanumerics. Only accepted slots may have one: drop a slot's token together with the slot."
  type        = map(string)
  default     = {}
  nullable    = false
  sensitive   = true

  validation {
    condition     = length(setsubtract(keys(var.caller_tokens), ["a", "b"])) == 0
    error_message = "caller_tokens may only have the keys \"a\" and \"b\", the caller-token slots."
  }
  validation {
    condition     = alltrue([for token in values(var.caller_tokens) : can(regex("^[A-Za-z0-9._~-]{32,}$", token))])
    error_message = "caller_tokens must be at least 32 URL-safe characters (A-Z a-z 0-9 . _ ~ -) each: a token is a credential that travels in the URL path."
  }
  validation {
    condition     = length(distinct(values(var.caller_tokens))) == length(var.caller_tokens)
    error_message = "caller_tokens must differ from slot to slot: the slots hold the token being rotated out and its successor."
  }
  validation {
    condition     = length(setsubtract(keys(var.caller_tokens), var.caller_token_accepted_slots)) == 0
    error_message = "caller_tokens has a token for a slot that caller_token_accepted_slots does not accept: remove it with its slot, so that a retired token never comes back when the slot is accepted again."
  }
  validation {
    condition     = length(var.caller_tokens) == 0 || var.caller_token_enabled != false
    error_message = "caller_tokens are set but caller_token_enabled = false: remove the tokens, or enable the caller token."
  }
}

variable "proxy_image" {
  description = "Image holding this repository's `extender` package, run as the identity proxy sidecar (`python -m extender proxy`). Required for IAM-only invocation."
  type        = string
  default     = null

  validation {
    condition     = var.invocation != "iam" || var.proxy_image != null
    error_message = "proxy_image is required when invocation = \"iam\": kube-scheduler cannot send identity tokens itself."
  }
}

variable "invoker_members" {
  description = "Further principals granted roles/run.invoker with IAM-only invocation, e.g. \"serviceAccount:...\" of a control-plane host running the proxy."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "proxy_service_account_email" {
  description = "IAM-only invocation: existing service account the identity proxy calls as. null: the module creates one. The module grants it roles/run.invoker on the function and (gke_workload_identity) the Workload Identity binding."
  type        = string
  default     = null

  validation {
    condition     = var.proxy_service_account_email == null || can(regex("^[a-z0-9-]+@[a-z0-9.-]+\\.gserviceaccount\\.com$", coalesce(var.proxy_service_account_email, "-")))
    error_message = "proxy_service_account_email must be a service account's email, e.g. scheduler-proxy@my-project.iam.gserviceaccount.com."
  }
  validation {
    condition     = var.proxy_service_account_email == null || var.invocation == "iam"
    error_message = "proxy_service_account_email is only used with invocation = \"iam\" (the identity proxy): remove it, or switch invocation."
  }
}

variable "gke_workload_identity" {
  description = "With IAM-only invocation, let the second scheduler's Kubernetes ServiceAccount act as the proxy's Google service account (Workload Identity). Set false outside GKE."
  type        = bool
  default     = true
  nullable    = false
}

variable "cluster_project_id" {
  description = "Project of the GKE cluster, whose Workload Identity pool (<project>.svc.id.goog) the binding names. null: project_id."
  type        = string
  default     = null
}

# --- The function ------------------------------------------------------------------------------------------------------

variable "source_dir" {
  description = "Directory holding main.py, extender/ and requirements.txt. null: this repository (the parent of this module)."
  type        = string
  default     = null
}

variable "policy_file" {
  description = "Path of the extender policy, packaged as policy.yaml (EXTENDER_POLICY). null: the embedded default policy. Relative to the directory Terraform runs in (in the pre-flight: terraform/, where terraform.tfvars is); keep it relative, so that a saved plan applies on a runner with another checkout path. Check it first: python -m extender check-policy FILE. The plan checks it against node_cache_capable, profile and function_name."
  type        = string
  default     = null

  validation {
    condition     = var.policy_file == null || can(yamldecode(file((can(regex("^(~|([A-Za-z]:)?[/\\\\])", var.policy_file)) ? var.policy_file : "${local.policy_directory}/${var.policy_file}"))).profiles)
    error_message = "policy_file ${coalesce(var.policy_file, "-")} cannot be read as a YAML or JSON policy with profiles: check it with python -m extender check-policy ${coalesce(var.policy_file, "-")}."
  }
  validation {
    # The function's URL may start with its name or entry point; start-up refuses a profile named like either.
    condition = length(try([
      for name in compact([for profile in yamldecode(file((can(regex("^(~|([A-Za-z]:)?[/\\\\])", var.policy_file)) ? var.policy_file : "${local.policy_directory}/${var.policy_file}"))).profiles : try(tostring(profile.name), null)]) :
      name if contains(["extender", var.function_name], name)
    ], [])) == 0
    error_message = "policy_file has a profile named \"extender\" (the function's entry point) or \"${var.function_name}\" (function_name): the function refuses to start, as such a URL segment names the function, not a profile. Rename the profile, or set another function_name."
  }
  validation {
    # The kubernetes node source lists the nodes before the function serves (plugins that read victim pods in
    # node-name mode need that source too): start-up refuses to start without the API server and a token, as
    # check-policy --env says (extender/nodesource/spec.py).
    condition     = !try(contains(keys(yamldecode(file((can(regex("^(~|([A-Za-z]:)?[/\\\\])", var.policy_file)) ? var.policy_file : "${local.policy_directory}/${var.policy_file}"))).nodeSource), "kubernetes"), false) || (var.kubernetes_api_url != null && var.kubernetes_token_secret != null)
    error_message = "policy_file's nodeSource is kubernetes: the function lists the nodes from the API server before it serves, and refuses to start without kubernetes_api_url and kubernetes_token_secret (with kubernetes_token_secret_version). Set both (deploy/kubernetes/extender-rbac.yaml makes the token), or use a nodeSource that needs no API (names, static)."
  }
}

variable "runtime" {
  description = "Cloud Functions Python runtime."
  type        = string
  default     = "python312"
  nullable    = false

  validation {
    condition     = can(regex("^python3(1[1-9])$", var.runtime))
    error_message = "runtime must be a Python runtime from python311 on, e.g. python312."
  }
}

variable "build_service_account" {
  description = "Service account that builds the function (projects/<project>/serviceAccounts/<email>). null: the project's default build service account."
  type        = string
  default     = null
}

variable "min_instance_count" {
  description = "Instances kept warm. A cold start of a Python function can exceed the scheduler's 5 s timeout, so keep at least 1."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = floor(var.min_instance_count) == var.min_instance_count && var.min_instance_count >= 0
    error_message = "min_instance_count must be a whole number, 0 or more."
  }
}

variable "max_instance_count" {
  description = "Upper bound on instances. Filter calls are sequential per scheduler, so a few suffice; the bound also caps cost if the URL is abused."
  type        = number
  default     = 5
  nullable    = false

  validation {
    condition     = floor(var.max_instance_count) == var.max_instance_count && var.max_instance_count >= max(1, var.min_instance_count)
    error_message = "max_instance_count must be a whole number of at least max(1, min_instance_count)."
  }
}

variable "available_memory" {
  description = "Memory per instance, a quantity with a unit (k, M, G, Mi, Gi) from 128Mi to 32Gi; more than 512Mi below 1 CPU needs at least 0.5, more than 1Gi needs 1, more than 4, 8, 16 or 24Gi needs 2, 4, 6 or 8 CPUs. Full-node requests (node_cache_capable = false) on large clusters are tens of MB of JSON."
  type        = string
  default     = "512Mi"
  nullable    = false

  validation {
    # A bare number would be bytes ("512" is 512 bytes, far below Cloud Functions' 128 MiB). The bytes are spelt out
    # in each rule: a validation cannot use a local derived from its own variable.
    condition = try(anytrue([
      for bytes in [for match in [regex("^([0-9]+(?:\\.[0-9]+)?)(k|M|G|Mi|Gi)$", var.available_memory)] : tonumber(match[0]) * local.memory_units[match[1]]] :
      bytes >= 128 * 1048576 && bytes <= 32 * 1073741824
    ]), false)
    error_message = "available_memory must be a quantity with a unit (k, M, G, Mi, Gi; a bare number is bytes) from 128Mi to 32Gi, e.g. \"512Mi\" or \"1Gi\"."
  }
  validation {
    # Cloud Run's minimum CPUs for a memory limit, and minimum memory for 4 or more CPUs.
    condition = try(anytrue([
      for bytes in [for match in [regex("^([0-9]+(?:\\.[0-9]+)?)(k|M|G|Mi|Gi)$", var.available_memory)] : tonumber(match[0]) * local.memory_units[match[1]]] :
      local.available_cpus >= (bytes > 24 * 1073741824 ? 8 : bytes > 16 * 1073741824 ? 6 : bytes > 8 * 1073741824 ? 4 : bytes > 4 * 1073741824 ? 2 : bytes > 1073741824 ? 1 : bytes > 536870912 ? 0.5 : 0)
      && bytes >= (local.available_cpus >= 6 ? 4 * 1073741824 : local.available_cpus >= 4 ? 2 * 1073741824 : 0)
    ]), true)
    error_message = "available_memory ${var.available_memory} does not fit available_cpu ${var.available_cpu}: Cloud Run needs at least 0.5 CPU above 512Mi, 1 above 1Gi, 2 above 4Gi, 4 above 8Gi, 6 above 16Gi, 8 above 24Gi, and at least 2Gi with 4 CPUs, 4Gi with 6 or 8. Raise available_cpu or lower available_memory."
  }
}

variable "available_cpu" {
  description = "vCPUs per instance, in any form Cloud Run accepts: \"1\", \"2\", \"0.5\", \"1000m\". Below 1 any fraction from 0.08; from 1 on 1, 2, 4, 6 or 8. Request concurrency above 1 needs at least 1."
  type        = string
  default     = "1"
  nullable    = false

  validation {
    # local.available_cpus, spelt out: a validation cannot use a local derived from its own variable.
    condition = can(regex("^([0-9]+(\\.[0-9]+)?|\\.[0-9]+|[0-9]+m)$", var.available_cpu)) && try(anytrue([
      for cpus in [endswith(var.available_cpu, "m") ? tonumber(trimsuffix(var.available_cpu, "m")) / 1000 : tonumber(var.available_cpu)] :
      cpus >= 0.08 && (cpus < 1 || contains([1, 2, 4, 6, 8], cpus))
    ]), false)
    error_message = "available_cpu must be a CPU quantity Cloud Run accepts: a fraction from 0.08 below 1 (\"0.5\", \"500m\") or 1, 2, 4, 6 or 8 (\"1\", \"1000m\", \"2\")."
  }
}

variable "concurrency" {
  description = "Requests one instance serves at once; THREADS is set to match. The scheduler calls sequentially, so a few threads cover it, healthz probes and the occasional parallel prioritize."
  type        = number
  default     = 8
  nullable    = false

  validation {
    condition     = floor(var.concurrency) == var.concurrency && var.concurrency >= 1 && var.concurrency <= 1000
    error_message = "concurrency must be a whole number between 1 and 1000."
  }
  validation {
    condition     = var.concurrency == 1 || local.available_cpus >= 1
    error_message = "concurrency above 1 needs available_cpu of at least 1."
  }
}

variable "ingress_settings" {
  description = "Where requests may come from. ALLOW_ALL: a scheduler outside Google Cloud or on a cluster without private access. ALLOW_INTERNAL_ONLY: only from VPC networks of the project (or Shared VPC)."
  type        = string
  default     = "ALLOW_ALL"
  nullable    = false

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.ingress_settings)
    error_message = "ingress_settings must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

# --- Private networks: direct VPC egress ----------------------------------------------------------------------------------

variable "direct_vpc_network" {
  description = "VPC network the function's outbound traffic enters (direct VPC egress), e.g. to reach a private GKE endpoint or to leave through Cloud NAT with a static address. null with direct_vpc_subnetwork null: no VPC egress."
  type        = string
  default     = null
}

variable "direct_vpc_subnetwork" {
  description = "Subnetwork the function's instances take addresses from (a /26 or larger in function_location). null: the subnetwork named like direct_vpc_network."
  type        = string
  default     = null
}

variable "direct_vpc_network_tags" {
  description = "Network tags of the function's instances, for firewall rules and Cloud NAT rules that select them."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = length(var.direct_vpc_network_tags) == 0 || local.direct_vpc_egress
    error_message = "direct_vpc_network_tags need direct_vpc_network or direct_vpc_subnetwork: tags only apply to direct VPC egress."
  }
}

variable "direct_vpc_egress" {
  description = "Which traffic goes through the VPC. VPC_EGRESS_PRIVATE_RANGES_ONLY: private addresses (a private GKE endpoint). VPC_EGRESS_ALL_TRAFFIC: everything, so that a public API server sees the Cloud NAT address in its authorized networks."
  type        = string
  default     = "VPC_EGRESS_PRIVATE_RANGES_ONLY"
  nullable    = false

  validation {
    condition     = contains(["VPC_EGRESS_PRIVATE_RANGES_ONLY", "VPC_EGRESS_ALL_TRAFFIC"], var.direct_vpc_egress)
    error_message = "direct_vpc_egress must be VPC_EGRESS_PRIVATE_RANGES_ONLY or VPC_EGRESS_ALL_TRAFFIC."
  }
  validation {
    condition     = var.direct_vpc_egress == "VPC_EGRESS_PRIVATE_RANGES_ONLY" || local.direct_vpc_egress
    error_message = "direct_vpc_egress = VPC_EGRESS_ALL_TRAFFIC needs direct_vpc_network or direct_vpc_subnetwork: without them the function has no VPC egress at all."
  }
}

# --- Node source / binder: the Kubernetes API the function reads nodes from --------------------------------------------

variable "kubernetes_api_url" {
  description = "Kubernetes API server URL for node lookups (node_cache_capable = true) and the bind verb, with kubernetes_token_secret (the function has no other API credential). null: none (plugins see node names only). A private address, or a hostname only a private DNS zone resolves, needs direct VPC egress."
  type        = string
  default     = null

  validation {
    condition     = var.kubernetes_api_url == null || startswith(coalesce(var.kubernetes_api_url, "-"), "https://")
    error_message = "kubernetes_api_url must be an https URL."
  }
  validation {
    # An address in a range only a VPC routes (a private cluster endpoint) is unreachable from Cloud Run's default
    # (internet) egress. The host is compared with each range by its network address at the range's prefix length.
    condition = local.direct_vpc_egress || !anytrue([
      for host in [try(coalesce(regex("^https://(?:\\[([0-9A-Fa-f:.]+)\\]|([^/:?#]+))", var.kubernetes_api_url)...), "")] :
      anytrue([for range in local.vpc_only_ranges : try(cidrhost("${host}/${split("/", range)[1]}", 0) == cidrhost(range, 0), false)])
    ])
    error_message = "kubernetes_api_url ${coalesce(var.kubernetes_api_url, "-")} is an address only a VPC routes (RFC 1918, RFC 6598 100.64.0.0/10, class E, link-local, IPv6 unique-local fc00::/7 or link-local fe80::/10): set direct_vpc_network (and direct_vpc_subnetwork) so the function reaches it over the VPC, or node lookups and bind fail."
  }
}

variable "kubernetes_ca_data" {
  description = "Base64 of the PEM CA of the API server (GKE: master_auth[0].cluster_ca_certificate). null: system roots."
  type        = string
  default     = null

  validation {
    condition     = var.kubernetes_ca_data == null || var.kubernetes_api_url != null
    error_message = "kubernetes_ca_data needs kubernetes_api_url: the function refuses to start with a CA but no API server."
  }
}

variable "kubernetes_token_secret" {
  description = "Secret Manager secret (id in project_id) holding the API token of a Kubernetes service account allowed to read nodes (and create pods/binding for bind). It reaches the function as KUBERNETES_TOKEN, at kubernetes_token_secret_version."
  type        = string
  default     = null

  validation {
    condition     = var.kubernetes_token_secret == null || var.kubernetes_api_url != null
    error_message = "kubernetes_token_secret needs kubernetes_api_url: the function refuses to start with a token but no API server."
  }
}

variable "kubernetes_token_secret_version" {
  description = "Version number of kubernetes_token_secret the function reads. Pinned, never \"latest\": a new number rolls out a new revision, while \"latest\" would leave warm instances on a rotated-out token."
  type        = string
  default     = null

  validation {
    condition     = (var.kubernetes_token_secret == null) == (var.kubernetes_token_secret_version == null)
    error_message = "kubernetes_token_secret and kubernetes_token_secret_version go together: name the secret and the version number the function reads."
  }
  validation {
    condition     = var.kubernetes_token_secret_version == null || can(regex("^[1-9][0-9]*$", coalesce(var.kubernetes_token_secret_version, "-")))
    error_message = "kubernetes_token_secret_version must be a version number such as \"3\", not \"latest\": a pinned version rolls a new revision when it changes, \"latest\" leaves warm instances on the old token."
  }
  validation {
    # The function's only API credential is KUBERNETES_TOKEN, which the secret at this version sets
    # (extender/kube/config.py). Checked here, where no other rule depends on it: on kubernetes_api_url it would make a
    # cycle with kubernetes_token_secret's rule, and on kubernetes_token_secret its failure would skip the rules of
    # policy_file and verbs that name what the policy or bind need.
    condition     = var.kubernetes_api_url == null || (var.kubernetes_token_secret != null && var.kubernetes_token_secret_version != null)
    error_message = "kubernetes_api_url needs kubernetes_token_secret (and kubernetes_token_secret_version): without a token the function calls the API server anonymously, which refuses to list nodes and pods and to bind. Store the token of deploy/kubernetes/extender-rbac.yaml's service account in Secret Manager and name it, or leave kubernetes_api_url null."
  }
}

# --- NodeLoad's Prometheus credentials: Secret Manager secrets, as files or PROMETHEUS_* variables ----------------------

locals {
  # What the policy's NodeLoad entries name for their Prometheus credentials (docs/plugins/nodeload.md): the files
  # (tokenFile, passwordFile, tls.caFile/certFile/keyFile) and the variables (tokenEnv, passwordEnv).
  node_load_prometheus = [
    for entry in flatten([for profile in try(local.policy.profiles, []) : try([for entry in profile.pluginConfig : entry], [])]) :
    entry.args.prometheus if try(entry.name == "NodeLoad", false) && can(entry.args.prometheus)
  ]
  prometheus_policy_files = distinct(flatten([for prometheus in local.node_load_prometheus : compact([
    try(tostring(prometheus.tokenFile), null), try(tostring(prometheus.passwordFile), null),
    try(tostring(prometheus.tls.caFile), null), try(tostring(prometheus.tls.certFile), null), try(tostring(prometheus.tls.keyFile), null),
  ])]))
  prometheus_policy_variables = distinct(flatten([for prometheus in local.node_load_prometheus : compact([
    try(tostring(prometheus.tokenEnv), null), try(tostring(prometheus.passwordEnv), null),
  ])]))
  # The secrets the function reads for them, each granted once.
  prometheus_secret_ids = toset(concat(
    [for file in values(var.prometheus_secret_files) : file.secret],
    [for variable in values(var.prometheus_secret_environment_variables) : variable.secret],
  ))
}

variable "prometheus_secret_files" {
  description = "Secret Manager secrets (ids in project_id) mounted into the function as files for NodeLoad's Prometheus credentials, by the absolute path the policy names (prometheus.tokenFile, passwordFile, tls.caFile, tls.certFile, tls.keyFile), e.g. { \"/etc/secrets/prometheus-token/token\" = { secret = \"mimir-read-token\" } }. version defaults to \"latest\": every read of a mounted secret gets that version, and NodeLoad reads the file again at least every minute and after a 401/403, so a rotated token is used without a new revision. One file per directory (Cloud Functions mounts each secret on a directory of its own)."
  type = map(object({
    secret  = string
    version = optional(string, "latest")
  }))
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for path in keys(var.prometheus_secret_files) : can(regex("^(/[A-Za-z0-9._-]+)+/[A-Za-z0-9._-]+$", path)) && !can(regex("^/(cloudsql|dev|pod|proc|sys|var/log|workspace|tmp)(/|$)", path)) && !strcontains(path, "/../") && !strcontains(path, "/./")])
    error_message = "prometheus_secret_files keys must be absolute file paths below a directory of their own, such as /etc/secrets/prometheus-token/token, outside /workspace (the function's code), /tmp, /cloudsql, /dev, /pod, /proc, /sys and /var/log."
  }
  validation {
    condition     = length(distinct([for path in keys(var.prometheus_secret_files) : dirname(path)])) == length(var.prometheus_secret_files)
    error_message = "prometheus_secret_files puts two files in one directory: Cloud Functions mounts each secret on a directory of its own, which hides anything else there. Give each file a directory, e.g. /etc/secrets/prometheus-token/token and /etc/secrets/prometheus-key/tls.key."
  }
  validation {
    condition     = alltrue([for file in values(var.prometheus_secret_files) : can(regex("^[A-Za-z0-9_-]{1,255}$", file.secret)) && can(regex("^(latest|[1-9][0-9]*)$", file.version))])
    error_message = "prometheus_secret_files: each secret is a Secret Manager secret id in project_id (letters, digits, - and _), and each version \"latest\" or a version number such as \"3\"."
  }
  validation {
    # Start-up refuses to start when a file the policy names is missing: say it at plan time, naming the files.
    condition     = length(setsubtract(local.prometheus_policy_files, keys(var.prometheus_secret_files))) == 0
    error_message = "policy_file's NodeLoad prometheus credentials name files the function would not have: ${join(", ", setsubtract(local.prometheus_policy_files, keys(var.prometheus_secret_files)))}. Mount each from Secret Manager with prometheus_secret_files = { \"<path>\" = { secret = \"<secret id>\" } }; the policy never holds a secret itself."
  }
}

variable "prometheus_secret_environment_variables" {
  description = "Secret Manager secrets (ids in project_id) that reach the function as PROMETHEUS_* variables for NodeLoad's prometheus.tokenEnv / passwordEnv, e.g. { PROMETHEUS_TOKEN = { secret = \"grafana-cloud-token\", version = \"3\" } }. Pinned version numbers only: variables are resolved when an instance starts, so a new number rolls out a new revision. prometheus_secret_files rotates without one."
  type = map(object({
    secret  = string
    version = string
  }))
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for name in keys(var.prometheus_secret_environment_variables) : can(regex("^PROMETHEUS_[A-Z0-9_]+$", name))])
    error_message = "prometheus_secret_environment_variables names must start with PROMETHEUS_ (e.g. PROMETHEUS_TOKEN): the function reads no other variable for NodeLoad's credentials."
  }
  validation {
    condition     = alltrue([for variable in values(var.prometheus_secret_environment_variables) : can(regex("^[A-Za-z0-9_-]{1,255}$", variable.secret)) && can(regex("^[1-9][0-9]*$", variable.version))])
    error_message = "prometheus_secret_environment_variables: each secret is a Secret Manager secret id in project_id, and each version a number such as \"3\", not \"latest\": warm instances would keep a rotated-out value (use prometheus_secret_files to follow latest)."
  }
  validation {
    condition     = length(setsubtract(local.prometheus_policy_variables, keys(var.prometheus_secret_environment_variables))) == 0
    error_message = "policy_file's NodeLoad prometheus credentials name variables the function would not have: ${join(", ", setsubtract(local.prometheus_policy_variables, keys(var.prometheus_secret_environment_variables)))}. Set each from Secret Manager with prometheus_secret_environment_variables = { <NAME> = { secret = \"<secret id>\", version = \"<number>\" } }."
  }
}

# --- Scheduler configuration (rendered by modules/scheduler-config) ----------------------------------------------------

variable "kubernetes_version" {
  description = "Version of the cluster's control plane as it reports it: \"1.31.4\", \"v1.31.4\" or GKE's \"1.31.4-gke.1200\". Its X.Y.Z tags the second scheduler's kube-scheduler image (scheduler_image_repository:vX.Y.Z), which must not be newer than the API server: an upgrade changes this variable only."
  type        = string
  nullable    = false
}

variable "scheduler_name" {
  description = "schedulerName pods set to use the extender; also names the second scheduler's objects. \"default-scheduler\" targets an existing scheduler (self-managed control plane)."
  type        = string
  default     = "extender-scheduler"
  nullable    = false
}

variable "scheduler_namespace" {
  description = "Namespace of the second scheduler and its leader-election Lease."
  type        = string
  default     = "kube-system"
  nullable    = false
}

variable "scheduler_image_repository" {
  description = "Repository of the second scheduler's image, tagged v<X.Y.Z of kubernetes_version>. Private clusters without internet egress: a mirror the nodes can pull from (an Artifact Registry remote repository of registry.k8s.io); the plan warns when kubernetes_api_url is a private address and this is the default."
  type        = string
  default     = "registry.k8s.io/kube-scheduler"
  nullable    = false
}

variable "scheduler_image" {
  description = "Image of the second scheduler, overriding scheduler_image_repository and the tag kubernetes_version gives (e.g. to pin a digest). null: scheduler_image_repository:v<X.Y.Z of kubernetes_version>. A tag of another version than kubernetes_version is warned about at plan."
  type        = string
  default     = null
}

variable "scheduler_replicas" {
  description = "Replicas of the second scheduler; leader election keeps one active and a standby takes over within seconds."
  type        = number
  default     = 2
  nullable    = false
}

variable "scheduler_resources" {
  description = "Resources of the kube-scheduler container. Its memory grows with the number of nodes and pods it caches."
  type = object({
    requests = optional(map(string), { cpu = "100m", memory = "256Mi" })
    limits   = optional(map(string), { memory = "1Gi" })
  })
  default  = {}
  nullable = false
}

variable "leader_election_lease_name" {
  description = "Leader-election Lease. null: scheduler_name, so the second scheduler never contends for the default scheduler's lock. \"kube-scheduler\" for an existing control-plane scheduler (scheduler_deployment = \"existing-scheduler\")."
  type        = string
  default     = null
}

variable "scheduler_deployment" {
  description = "Which kube-scheduler runs the extender's configuration. \"second-scheduler\": a Deployment of its own from the kubernetes_manifests output, with in-cluster credentials; pods opt in with spec.schedulerName. \"existing-scheduler\": a kube-scheduler you start with --config (kube_scheduler_configuration), such as a self-managed control plane's; kubernetes_manifests is null then."
  type        = string
  default     = "second-scheduler"
  nullable    = false
}

variable "kubeconfig" {
  description = "clientConnection.kubeconfig of the configuration, with scheduler_deployment = \"existing-scheduler\" only: a control-plane scheduler started with --config ignores --kubeconfig and needs it here (kubeadm: /etc/kubernetes/scheduler.conf). null: in-cluster credentials, which the second scheduler always uses."
  type        = string
  default     = null
}

variable "profile" {
  description = "Extender policy profile the scheduler calls (path segment). null: the policy's default profile. Must be a profile of the policy: an unknown one is answered 404."
  type        = string
  default     = null

  validation {
    condition     = try(contains(local.policy_profiles, coalesce(var.profile, "default")), true)
    error_message = "${var.profile == null ? "profile is null, so the scheduler calls the default profile, which the policy does not have" : "profile \"${var.profile}\" is not a profile of the policy"} (it has ${try(join(", ", local.policy_profiles), "")}): every call would answer 404. Set profile to one of them."
  }
}

variable "verbs" {
  description = "Verbs kube-scheduler calls: filter, prioritize, preempt, bind. bind needs kubernetes_api_url and kubernetes_token_secret, a token allowed to create pods/binding."
  type        = set(string)
  default     = ["filter", "prioritize"]
  nullable    = false

  validation {
    condition     = !contains(var.verbs, "bind") || var.kubernetes_api_url != null
    error_message = "The bind verb needs kubernetes_api_url (and kubernetes_token_secret): the function must create the Binding itself, or pods stay Pending."
  }
  validation {
    condition     = !contains(var.verbs, "bind") || var.kubernetes_token_secret != null
    error_message = "The bind verb needs kubernetes_token_secret (and kubernetes_token_secret_version): without a token every Binding is sent anonymously and refused, and no pod is bound. Store the token of deploy/kubernetes/extender-rbac.yaml's service account in Secret Manager and name it, or drop bind from verbs."
  }
}

variable "weight" {
  description = "Weight of the extender's prioritize scores (score x weight x 10 per node, next to the in-tree plugins' 0-100). A policy scoring with NodeLoad needs 3 or more to place a burst by load (the plan warns below that; 5 recommended)."
  type        = number
  default     = 1
  nullable    = false
}

variable "http_timeout" {
  description = "kube-scheduler's httpTimeout for each call (Go duration). Also EXTENDER_HTTP_TIMEOUT (the function's latency budget), the function's own timeout, rounded up, and the alert threshold's base."
  type        = string
  default     = "5s"
  nullable    = false
}

variable "ignorable" {
  description = "false: an unreachable or failing extender fails the scheduling attempt, so the policy is never bypassed. true: scheduling continues without it (availability over policy)."
  type        = bool
  default     = false
  nullable    = false
}

variable "node_cache_capable" {
  description = "true: the scheduler sends node names only and the function looks nodes up (needs kubernetes_api_url for node facts). false: full Node objects in every request, which from Kubernetes 1.33 on blinds the scheduler's resource scoring (see allow_blind_resource_scoring). Must match the policy's nodeCacheCapable when it declares one."
  type        = bool
  default     = true
  nullable    = false

  validation {
    condition     = try(local.policy_node_cache_capable == null || local.policy_node_cache_capable == var.node_cache_capable, false)
    error_message = "policy_file declares nodeCacheCapable: ${jsonencode(local.policy_node_cache_capable)}, but node_cache_capable = ${var.node_cache_capable}: the scheduler would send ${var.node_cache_capable ? "node names" : "full Node objects"} to a policy written for the other mode, and every filter would answer Error. Set node_cache_capable = ${jsonencode(local.policy_node_cache_capable)}, or change nodeCacheCapable in the policy (without it the policy serves both modes)${try(local.kubernetes_minor >= 33, false) ? "; from Kubernetes 1.33 on, full Node objects blind resource scoring, so prefer node names" : ""}."
  }
  validation {
    # kubernetes/kubernetes#141781: since 1.33 the nodes an extender's filter returns in full-node mode are scored on
    # an empty NodeInfo.
    condition     = var.node_cache_capable || var.allow_blind_resource_scoring || !contains(var.verbs, "filter") || try(local.kubernetes_minor < 33, true)
    error_message = "node_cache_capable = false with kubernetes_version ${var.kubernetes_version}: from 1.33 on kube-scheduler scores the nodes the extender's filter returns as if nothing ran on them (kubernetes/kubernetes#141781), so NodeResourcesFit and NodeResourcesBalancedAllocation see busy nodes as idle. Set node_cache_capable = true (and nodeCacheCapable: true, or none, in the policy), or allow_blind_resource_scoring = true to accept blind resource scoring."
  }
}

variable "allow_blind_resource_scoring" {
  description = "Accept node_cache_capable = false with Kubernetes 1.33 or newer, whose scheduler then scores every node the extender's filter returns as empty (kubernetes/kubernetes#141781). Leave false unless resource scoring does not matter to you."
  type        = bool
  default     = false
  nullable    = false
}

variable "managed_resources" {
  description = "Extended resources (e.g. example.com/gpu) that route pods to the extender; empty: every pod of the scheduler. ignored_by_scheduler leaves the fit check for that resource to the extender alone."
  type = list(object({
    name                 = string
    ignored_by_scheduler = optional(bool, false)
  }))
  default  = []
  nullable = false
}

variable "percentage_of_nodes_to_score" {
  description = "Share of feasible nodes the scheduler collects before scoring (0-100), set on the extender's profile only (Kubernetes >= 1.27). 100: the extender sees every feasible node. null: the scheduler's adaptive default; required with scheduler_name = \"default-scheduler\"."
  type        = number
  default     = 100
}

variable "tls" {
  description = "How kube-scheduler checks the function's certificate (see modules/scheduler-config). {}: system roots, which trust Google's public certificate. ca_data: base64 of a PEM bundle to trust instead. insecure = true: no verification."
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
}

variable "tls_key_data" {
  description = "Client private key for mTLS (base64 of PEM), paired with tls.cert_data. Cloud Run does not check client certificates itself: only for a load balancer in front."
  type        = string
  default     = null
  sensitive   = true
}

# --- Monitoring --------------------------------------------------------------------------------------------------------

variable "monitoring_enabled" {
  description = "Create the log-based metrics (requests, errors, unauthenticated, latency, rejections, would_reject, skipped, source_failures, identity_proxy_failures), the alert policies and the dashboard (dashboard_enabled)."
  type        = bool
  default     = true
  nullable    = false
}

variable "dashboard_enabled" {
  description = "Create a Cloud Monitoring dashboard of the extender: calls per verb and status, latency against http_timeout, rejections and audited would-rejects per plugin and rule, errors, Cloud Run instances and cold starts. Its charts read the log-based metrics, so there is none without monitoring_enabled."
  type        = bool
  default     = true
  nullable    = false
}

variable "notification_channels" {
  description = "Monitoring notification channel ids every alert policy notifies. Empty: incidents only show in the console."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "alert_latency_ratio" {
  description = "The latency alerts fire when p99 latency (the function's, and Cloud Run's) stays above this share of http_timeout for alert_window_minutes: above it, calls are about to time out and fail scheduling."
  type        = number
  default     = 0.8
  nullable    = false

  validation {
    condition     = var.alert_latency_ratio > 0 && var.alert_latency_ratio <= 1
    error_message = "alert_latency_ratio must be in (0, 1]."
  }
}

variable "alert_window_minutes" {
  description = "Window the alerts count over: errors and refused calls alert when alert_error_count of them fall within it, latency when p99 stays high for that long."
  type        = number
  default     = 5
  nullable    = false

  validation {
    condition     = floor(var.alert_window_minutes) == var.alert_window_minutes && var.alert_window_minutes >= 1 && var.alert_window_minutes <= 60
    error_message = "alert_window_minutes must be a whole number of minutes from 1 to 60."
  }
}

variable "alert_error_count" {
  description = "Errors (or refused, failed or unauthenticated scheduler calls) within alert_window_minutes that open an incident. Above 1, so that a single stray failure never pages."
  type        = number
  default     = 3
  nullable    = false

  validation {
    condition     = floor(var.alert_error_count) == var.alert_error_count && var.alert_error_count >= 1
    error_message = "alert_error_count must be a whole number of at least 1."
  }
}

variable "alert_latency_min_requests" {
  description = "Calls of a verb within alert_window_minutes below which its latency alerts stay quiet: the p99 of fewer than 100 calls is its slowest call, and one slow call in sparse traffic is no trouble. Timeouts still alert through cloud_run_failed."
  type        = number
  default     = 100
  nullable    = false

  validation {
    condition     = floor(var.alert_latency_min_requests) == var.alert_latency_min_requests && var.alert_latency_min_requests >= 1
    error_message = "alert_latency_min_requests must be a whole number of at least 1."
  }
}
