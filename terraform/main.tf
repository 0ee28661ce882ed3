locals {
  # Where a relative policy_file is read from (variables.tf, local.policy_path): the directory Terraform runs in, as
  # for every path a caller passes, and the same on any runner a saved plan is applied on.
  policy_directory = path.root

  source_dir = coalesce(var.source_dir, "${path.module}/..")
  # What Cloud Functions needs to build and run the function, chosen by name so that nothing else gets in: Python
  # sources and the package's text data (policy/default.yaml). Bytecode, native libraries, editor and OS files
  # (.DS_Store) never match, so a stray binary file cannot fail the plan; tests are left out.
  source_files = sort([
    for file in setunion(
      fileset(local.source_dir, "main.py"),
      fileset(local.source_dir, "requirements.txt"),
      fileset(local.source_dir, "extender/**/*.{py,yaml,yml,json}"),
      fileset(local.source_dir, "extender/**/py.typed"),
    ) : file if !can(regex("(^|/)(__pycache__|tests?)/|(^|/)\\.", file))
  ])
  # The archive's identity, known at plan time on any machine: every packaged file's path and SHA-256.
  source_sha256 = sha256(join("\n", concat(
    [for file in local.source_files : "${file} ${filesha256("${local.source_dir}/${file}")}"],
    var.policy_file == null ? [] : ["policy.yaml ${filesha256(local.policy_path)}"],
  )))
  # Workspace and function name keep two deployments from sharing a local zip or an object name.
  source_key = "${terraform.workspace}/${var.function_name}/${local.source_sha256}"

  # Each accepted slot's token: your own (caller_tokens) or generated. The rendered configuration carries the active
  # slot's (variables.tf holds the slot logic).
  caller_tokens = { for slot in local.caller_token_slots : slot => try(var.caller_tokens[slot], random_password.caller_token[slot].result) }
  caller_token  = local.caller_token_enabled ? local.caller_tokens[var.caller_token_active_slot] : null
  # Known at plan time: the function's secret references do not wait on the secret resource (provider issue #22497).
  caller_token_secret_id = "${var.function_name}-caller-token"

  # The URL kube-scheduler calls (scheduler_config.tf).
  function_uri = google_cloudfunctions2_function.extender.service_config[0].uri

  function_service_account_email  = coalesce(var.function_service_account_email, one(google_service_account.function[*].email))
  function_service_account_member = "serviceAccount:${local.function_service_account_email}"
  proxy_service_account_email     = var.invocation == "iam" ? coalesce(var.proxy_service_account_email, one(google_service_account.scheduler_proxy[*].email)) : null

  # NodeLoad entries of the policy that query Cloud Monitoring as the function: auth "google", which the gke preset
  # implies unless it sets auth itself. Each needs roles/monitoring.viewer on the project its URL names, and the gke
  # preset's default URL names GOOGLE_CLOUD_PROJECT (project_id).
  node_load_google_auth_urls = [
    for entry in flatten([for profile in try(local.policy.profiles, []) : try([for entry in profile.pluginConfig : entry], [])]) :
    try(entry.args.prometheus.url, null)
    if try(entry.name == "NodeLoad", false) && (
      try(entry.args.prometheus.auth == "google", false) || (try(entry.args.preset == "gke", false) && try(entry.args.prometheus.auth, null) == null)
    )
  ]
  monitoring_viewer_projects = toset([
    for url in local.node_load_google_auth_urls : try(regex("^https://monitoring\\.googleapis\\.com/v1/projects/([^/]+)/", url)[0], var.project_id)
  ])

  http_timeout_seconds = ceil(module.scheduler_config.http_timeout_ms / 1000)
  cluster_project_id   = coalesce(var.cluster_project_id, var.project_id)

  # PYTHONMALLOC: objects from glibc's allocator, which returns memory by the page once a large request is done
  # (Python's own keeps a whole 1 MiB arena for any object that outlives the request); GLIBC_TUNABLES: per-thread
  # caches of one freed chunk per size, not seven, as their chunks keep pages of the shared heap in use
  # (docs/architecture.md).
  environment_variables = { for name, value in {
    PYTHONMALLOC          = "malloc"
    GLIBC_TUNABLES        = "glibc.malloc.tcache_count=1"
    EXTENDER_HTTP_TIMEOUT = var.http_timeout
    THREADS               = tostring(var.concurrency)
    EXTENDER_POLICY       = var.policy_file == null ? null : "policy.yaml"
    KUBERNETES_API_URL    = var.kubernetes_api_url
    KUBERNETES_CA_DATA    = var.kubernetes_ca_data
    GOOGLE_CLOUD_PROJECT  = var.project_id
  } : name => value if value != null }

  # Every secret pinned to a version: a new token is a new version number, which rolls out a new revision (warm
  # instances keep the environment they started with, so "latest" would leave them on a rotated-out token).
  secret_environment_variables = merge(
    { for name, slot in local.caller_token_secret_slots : name => {
      secret  = local.caller_token_secret_id
      version = google_secret_manager_secret_version.caller_token[slot].version
    } },
    var.kubernetes_token_secret == null ? {} : { KUBERNETES_TOKEN = {
      secret  = var.kubernetes_token_secret
      version = var.kubernetes_token_secret_version
    } },
    var.prometheus_secret_environment_variables,
  )

  apis = [
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each = toset(var.enable_apis ? local.apis : [])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# An API reported enabled may still refuse calls for a while; everything that uses one waits here once, when the APIs
# are first enabled (not on later applies).
resource "time_sleep" "apis" {
  create_duration = var.enable_apis ? "60s" : "0s"
  triggers        = { apis = join(",", sort(keys(google_project_service.apis))) }
}

# --- Source --------------------------------------------------------------------------------------------------------------

# Plan and apply may run on different machines (a CI job applying a saved plan). The zip is only needed when the
# object is uploaded, i.e. when the sources changed; then this resource has a change, which defers reading the
# archive to the apply, on the machine that uploads it. Unchanged sources are read at plan time and never uploaded.
resource "terraform_data" "source" {
  # The bucket too: a new bucket needs the zip uploaded again.
  input = { key = local.source_key, bucket = google_storage_bucket.source.name }
}

data "archive_file" "source" {
  type        = "zip"
  output_path = "${path.root}/.terraform/extender-source/${local.source_key}.zip"

  dynamic "source" {
    for_each = local.source_files
    content {
      content  = file("${local.source_dir}/${source.value}")
      filename = source.value
    }
  }
  dynamic "source" {
    for_each = var.policy_file == null ? [] : [local.policy_path]
    content {
      content  = file(source.value)
      filename = "policy.yaml"
    }
  }

  depends_on = [terraform_data.source]
}

resource "random_id" "bucket_suffix" {
  byte_length = 4
}

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.function_name}-source-${random_id.bucket_suffix.hex}"
  location                    = var.function_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Holds nothing but the zips this module uploads.
  force_destroy = true
  labels        = var.labels

  versioning {
    enabled = true
  }
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [time_sleep.apis]
}

resource "google_storage_bucket_object" "source" {
  # Named by content, workspace and function, all known at plan time: a changed source is a new object, which
  # redeploys the function.
  name   = "${local.source_key}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.source.output_path

  # The new zip is uploaded, and the function moved to it, before the old one is deleted: an apply that fails in
  # between leaves the function on an object that still exists.
  lifecycle {
    create_before_destroy = true
  }
}

# --- Identity and secrets ------------------------------------------------------------------------------------------------

resource "google_service_account" "function" {
  count = var.function_service_account_email == null ? 1 : 0

  project      = var.project_id
  account_id   = var.function_name
  display_name = "kube-scheduler extender ${var.function_name}"
  description  = "Runs the ${var.function_name} function: reads its secrets (and Cloud Monitoring for NodeLoad), nothing else."

  depends_on = [time_sleep.apis]
}

moved {
  from = google_service_account.function
  to   = google_service_account.function[0]
}

# One token per accepted slot without a token of your own: created when its slot is accepted, destroyed when the slot
# is dropped, and replaced by nothing else (the keepers an earlier version of this module set stay ignored in state).
resource "random_password" "caller_token" {
  for_each = local.generated_caller_token_slots

  length  = 48
  special = false

  lifecycle {
    ignore_changes = [keepers]
  }
}

moved {
  from = random_password.caller_token[0]
  to   = random_password.caller_token["a"]
}

resource "google_secret_manager_secret" "caller_token" {
  count = local.caller_token_enabled ? 1 : 0

  project   = var.project_id
  secret_id = local.caller_token_secret_id
  labels    = var.labels

  replication {
    dynamic "auto" {
      for_each = length(var.secret_replica_locations) == 0 ? [1] : []
      content {}
    }
    dynamic "user_managed" {
      for_each = length(var.secret_replica_locations) == 0 ? [] : [1]
      content {
        dynamic "replicas" {
          for_each = var.secret_replica_locations
          content {
            location = replicas.value
          }
        }
      }
    }
  }

  depends_on = [time_sleep.apis]
}

# One version per accepted slot, which the function pins. A changed token is a new version, created and served before
# the old one is destroyed.
resource "google_secret_manager_secret_version" "caller_token" {
  for_each = local.caller_token_slots

  secret      = google_secret_manager_secret.caller_token[0].id
  secret_data = local.caller_tokens[each.key]

  lifecycle {
    create_before_destroy = true
  }
}

moved {
  from = google_secret_manager_secret_version.caller_token[0]
  to   = google_secret_manager_secret_version.caller_token["a"]
}

resource "google_secret_manager_secret_iam_member" "caller_token" {
  count = local.caller_token_enabled ? 1 : 0

  project   = var.project_id
  secret_id = google_secret_manager_secret.caller_token[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = local.function_service_account_member
}

resource "google_secret_manager_secret_iam_member" "kubernetes_token" {
  count = var.kubernetes_token_secret == null ? 0 : 1

  project   = var.project_id
  secret_id = var.kubernetes_token_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = local.function_service_account_member
}

# NodeLoad's Prometheus credentials (prometheus_secret_files, prometheus_secret_environment_variables): each secret
# readable by the function's account alone.
resource "google_secret_manager_secret_iam_member" "prometheus" {
  for_each = local.prometheus_secret_ids

  project   = var.project_id
  secret_id = each.value
  role      = "roles/secretmanager.secretAccessor"
  member    = local.function_service_account_member
}

# NodeLoad with Google auth reads Cloud Monitoring's Prometheus API as the function. Granted to an account the module
# created; an existing account needs it beforehand (a deployer who brings accounts holds no project IAM admin role).
resource "google_project_iam_member" "function_monitoring_viewer" {
  for_each = var.function_service_account_email == null ? local.monitoring_viewer_projects : toset([])

  project = each.value
  role    = "roles/monitoring.viewer"
  member  = local.function_service_account_member
}

# IAM grants take effect within a minute or two; a revision started before its account may read the secrets fails to
# deploy. Waits when a grant is (re)created, not on later applies.
resource "time_sleep" "secret_access" {
  create_duration = "60s"
  triggers = {
    grants = join(",", concat(
      google_secret_manager_secret_iam_member.caller_token[*].id,
      google_secret_manager_secret_iam_member.kubernetes_token[*].id,
      [for grant in google_secret_manager_secret_iam_member.prometheus : grant.id],
      [for grant in google_project_iam_member.function_monitoring_viewer : grant.id],
    ))
  }
}

# --- The function --------------------------------------------------------------------------------------------------------

resource "google_cloudfunctions2_function" "extender" {
  project     = var.project_id
  name        = var.function_name
  location    = var.function_location
  description = "kube-scheduler extender: filter/prioritize/preempt/bind over HTTPS."
  labels      = var.labels

  build_config {
    runtime         = var.runtime
    entry_point     = "extender"
    service_account = var.build_service_account

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
        # Taken from the object, not left to the API: a new zip and a function update in one apply otherwise end in
        # "Provider produced inconsistent result ... storage_source[0].generation" (provider issue #19134).
        generation = google_storage_bucket_object.source.generation
      }
    }
  }

  service_config {
    min_instance_count               = var.min_instance_count
    max_instance_count               = var.max_instance_count
    available_memory                 = var.available_memory
    available_cpu                    = var.available_cpu
    max_instance_request_concurrency = var.concurrency
    # The scheduler has given up by then: work past its timeout is wasted. At most 3600 (Cloud Run's cap), which
    # modules/scheduler-config enforces on http_timeout.
    timeout_seconds                = local.http_timeout_seconds
    ingress_settings               = var.ingress_settings
    all_traffic_on_latest_revision = true
    service_account_email          = local.function_service_account_email
    environment_variables          = local.environment_variables
    direct_vpc_egress              = local.direct_vpc_egress ? var.direct_vpc_egress : null

    dynamic "direct_vpc_network_interface" {
      for_each = local.direct_vpc_egress ? [1] : []
      content {
        network    = var.direct_vpc_network
        subnetwork = var.direct_vpc_subnetwork
        tags       = var.direct_vpc_network_tags
      }
    }

    dynamic "secret_environment_variables" {
      for_each = local.secret_environment_variables
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value.secret
        version    = secret_environment_variables.value.version
      }
    }

    # NodeLoad's Prometheus credentials as files: each secret on a directory of its own, at the version given
    # ("latest": every read gets the current version, so rotation needs no new revision).
    dynamic "secret_volumes" {
      for_each = var.prometheus_secret_files
      content {
        mount_path = dirname(secret_volumes.key)
        project_id = var.project_id
        secret     = secret_volumes.value.secret
        versions {
          version = secret_volumes.value.version
          path    = basename(secret_volumes.key)
        }
      }
    }
  }

  # The revision cannot start before the service account may read its secrets, nor the APIs answer.
  depends_on = [time_sleep.apis, time_sleep.secret_access]
}

# --- Invocation ----------------------------------------------------------------------------------------------------------

# kube-scheduler sends no credentials. 2nd gen functions only accept run.invoker on the Cloud Run service (named after
# the function) for allUsers; the function-level IAM resource rejects that role.
resource "google_cloud_run_service_iam_member" "public_invoker" {
  count = var.invocation == "public" ? 1 : 0

  project  = var.project_id
  location = google_cloudfunctions2_function.extender.location
  service  = google_cloudfunctions2_function.extender.name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# IAM-only: the identity proxy beside the scheduler calls as this service account.
resource "google_service_account" "scheduler_proxy" {
  count = var.invocation == "iam" && var.proxy_service_account_email == null ? 1 : 0

  project      = var.project_id
  account_id   = "${substr(var.function_name, 0, 24)}-proxy"
  display_name = "kube-scheduler identity proxy for ${var.function_name}"
  description  = "Calls the ${var.function_name} function on behalf of kube-scheduler."

  depends_on = [time_sleep.apis]
}

resource "google_cloud_run_service_iam_member" "proxy_invoker" {
  count = var.invocation == "iam" ? 1 : 0

  project  = var.project_id
  location = google_cloudfunctions2_function.extender.location
  service  = google_cloudfunctions2_function.extender.name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${local.proxy_service_account_email}"
}

resource "google_cloud_run_service_iam_member" "extra_invokers" {
  for_each = toset(var.invocation == "iam" ? var.invoker_members : [])

  project  = var.project_id
  location = google_cloudfunctions2_function.extender.location
  service  = google_cloudfunctions2_function.extender.name
  role     = "roles/run.invoker"
  member   = each.value
}

# Workload Identity: the second scheduler's Kubernetes ServiceAccount acts as the proxy's Google service account.
resource "google_service_account_iam_member" "scheduler_proxy_workload_identity" {
  count = var.invocation == "iam" && var.gke_workload_identity ? 1 : 0

  # "-": an existing account's project is taken from its email by the IAM API.
  service_account_id = var.proxy_service_account_email == null ? google_service_account.scheduler_proxy[0].name : "projects/-/serviceAccounts/${var.proxy_service_account_email}"
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${local.cluster_project_id}.svc.id.goog[${var.scheduler_namespace}/${var.scheduler_name}]"
}
