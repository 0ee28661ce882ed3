# The root module's own validation rules, run by test_terraform_root_variables.py against a copy of
# terraform/variables.tf alone (the rest of the root module needs the google provider).

variables {
  project_id         = "acme-scheduling"
  function_location  = "us-central1"
  invocation         = "public"
  kubernetes_version = "1.31.4"
}

run "public_invocation_needs_nothing_else" {
  command = plan
}

run "iam_invocation_with_a_proxy_image" {
  command = plan
  variables {
    invocation  = "iam"
    proxy_image = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
  }
}

run "invocation_must_be_chosen_from_two" {
  command = plan
  variables { invocation = "private" }
  expect_failures = [var.invocation]
}

run "iam_invocation_without_proxy_image" {
  command = plan
  variables { invocation = "iam" }
  expect_failures = [var.proxy_image]
}

run "name_too_short_for_a_service_account" {
  command = plan
  variables { function_name = "ext" }
  expect_failures = [var.function_name]
}

run "name_with_uppercase" {
  command = plan
  variables { function_name = "Scheduler-Extender" }
  expect_failures = [var.function_name]
}

run "runtime_not_python" {
  command = plan
  variables { runtime = "nodejs20" }
  expect_failures = [var.runtime]
}

run "negative_min_instances" {
  command = plan
  variables { min_instance_count = -1 }
  expect_failures = [var.min_instance_count]
}

run "max_instances_below_min" {
  command = plan
  variables {
    min_instance_count = 3
    max_instance_count = 2
  }
  expect_failures = [var.max_instance_count]
}

run "concurrency_zero" {
  command = plan
  variables { concurrency = 0 }
  expect_failures = [var.concurrency]
}

run "concurrency_above_one_on_a_fraction_of_a_cpu" {
  command = plan
  variables {
    concurrency   = 4
    available_cpu = "0.5"
  }
  expect_failures = [var.concurrency]
}

run "single_request_on_a_fraction_of_a_cpu_is_fine" {
  command = plan
  variables {
    concurrency   = 1
    available_cpu = "0.5"
  }
}

run "unknown_ingress_setting" {
  command = plan
  variables { ingress_settings = "INTERNAL" }
  expect_failures = [var.ingress_settings]
}

run "api_url_not_https" {
  command = plan
  variables {
    kubernetes_api_url              = "http://10.0.0.1"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "api_url_without_a_token" {
  # The function's only API credential is the token: without it every node lookup is refused as anonymous.
  command = plan
  variables { kubernetes_api_url = "https://34.118.0.10" }
  expect_failures = [var.kubernetes_token_secret_version]
}

run "ca_without_api_url" {
  command = plan
  variables { kubernetes_ca_data = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" }
  expect_failures = [var.kubernetes_ca_data]
}

run "token_without_api_url" {
  command = plan
  variables {
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "3"
  }
  expect_failures = [var.kubernetes_token_secret]
}

run "bind_without_api_url" {
  command = plan
  variables { verbs = ["filter", "bind"] }
  expect_failures = [var.verbs]
}

run "bind_with_api_url" {
  command = plan
  variables {
    verbs                           = ["filter", "bind"]
    kubernetes_api_url              = "https://34.118.0.10"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "3"
  }
}

run "alert_ratio_above_one" {
  command = plan
  variables { alert_latency_ratio = 1.5 }
  expect_failures = [var.alert_latency_ratio]
}

run "alert_ratio_zero" {
  command = plan
  variables { alert_latency_ratio = 0 }
  expect_failures = [var.alert_latency_ratio]
}

# --- The open endpoint needs an explicit acceptance -------------------------------------------------------------------

run "public_invocation_without_token_is_refused" {
  command = plan
  variables { caller_token_enabled = false }
  expect_failures = [var.caller_token_enabled]
}

run "public_invocation_without_token_once_the_risk_is_accepted" {
  command = plan
  variables {
    caller_token_enabled                 = false
    accept_unauthenticated_open_endpoint = true
  }
}

run "iam_invocation_without_token_needs_no_acceptance" {
  command = plan
  variables {
    invocation           = "iam"
    proxy_image          = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
    caller_token_enabled = false
  }
}

# --- Caller-token slots (the rotation itself: rotation.tftest.hcl) -----------------------------------------------------

run "both_slots_accepted_during_a_rotation" {
  command = plan
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
  }
}

run "accepted_slot_unknown" {
  command = plan
  variables { caller_token_accepted_slots = ["a", "c"] }
  expect_failures = [var.caller_token_accepted_slots]
}

run "no_slot_accepted" {
  command = plan
  variables { caller_token_accepted_slots = [] }
  expect_failures = [var.caller_token_accepted_slots]
}

run "active_slot_unknown" {
  command = plan
  variables { caller_token_active_slot = "c" }
  expect_failures = [var.caller_token_active_slot]
}

run "active_slot_not_accepted" {
  command = plan
  variables { caller_token_active_slot = "b" }
  expect_failures = [var.caller_token_active_slot]
}

run "own_tokens_in_both_slots" {
  command = plan
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_tokens = {
      a = "0ldT0ken0ldT0ken0ldT0ken0ldT0ken0ldT0ken"
      b = "n3wT0kenN3wT0kenN3wT0kenN3wT0kenN3wT0ken"
    }
  }
}

run "own_token_for_an_unknown_slot" {
  command = plan
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_tokens               = { c = "n3wT0kenN3wT0kenN3wT0kenN3wT0kenN3wT0ken" }
  }
  expect_failures = [var.caller_tokens]
}

run "own_token_too_short" {
  command = plan
  variables { caller_tokens = { a = "short" } }
  expect_failures = [var.caller_tokens]
}

run "own_tokens_equal" {
  command = plan
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_tokens = {
      a = "sameT0kenSameT0kenSameT0kenSameT0kenSame"
      b = "sameT0kenSameT0kenSameT0kenSameT0kenSame"
    }
  }
  expect_failures = [var.caller_tokens]
}

run "own_token_kept_for_a_dropped_slot" {
  command = plan
  variables { caller_tokens = { b = "0ldT0ken0ldT0ken0ldT0ken0ldT0ken0ldT0ken" } }
  expect_failures = [var.caller_tokens]
}

run "own_token_with_the_token_disabled" {
  command = plan
  variables {
    caller_token_enabled                 = false
    accept_unauthenticated_open_endpoint = true
    caller_tokens                        = { a = "0ldT0ken0ldT0ken0ldT0ken0ldT0ken0ldT0ken" }
  }
  expect_failures = [var.caller_tokens]
}

# --- Secrets where the organisation allows them -------------------------------------------------------------------------

run "secrets_replicated_to_two_regions" {
  command = plan
  variables { secret_replica_locations = ["europe-west1", "europe-west4"] }
}

run "secret_replica_in_a_multi_region" {
  command = plan
  variables { secret_replica_locations = ["europe"] }
  expect_failures = [var.secret_replica_locations]
}

run "secret_replica_region_repeated" {
  command = plan
  variables { secret_replica_locations = ["europe-west1", "europe-west1"] }
  expect_failures = [var.secret_replica_locations]
}

# --- Existing service accounts ------------------------------------------------------------------------------------------

run "existing_service_accounts" {
  command = plan
  variables {
    invocation                     = "iam"
    proxy_image                    = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
    function_service_account_email = "scheduler-extender@acme-scheduling.iam.gserviceaccount.com"
    proxy_service_account_email    = "scheduler-proxy@acme-scheduling.iam.gserviceaccount.com"
  }
}

run "function_account_not_an_email" {
  command = plan
  variables { function_service_account_email = "scheduler-extender" }
  expect_failures = [var.function_service_account_email]
}

run "proxy_account_not_an_email" {
  command = plan
  variables {
    invocation                  = "iam"
    proxy_image                 = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
    proxy_service_account_email = "projects/acme-scheduling/serviceAccounts/scheduler-proxy"
  }
  expect_failures = [var.proxy_service_account_email]
}

run "proxy_account_without_the_proxy" {
  command = plan
  variables { proxy_service_account_email = "scheduler-proxy@acme-scheduling.iam.gserviceaccount.com" }
  expect_failures = [var.proxy_service_account_email]
}

# --- The policy, the scheduler configuration and the Kubernetes version agree -----------------------------------------

run "policy_file_unreadable" {
  command = plan
  variables { policy_file = "policies/unreadable.yaml" }
  expect_failures = [var.policy_file]
}

run "policy_file_missing" {
  command = plan
  variables { policy_file = "policies/missing.yaml" }
  expect_failures = [var.policy_file]
}

run "policy_profile_named_like_the_entry_point" {
  command = plan
  variables { policy_file = "policies/profile-extender.yaml" }
  expect_failures = [var.policy_file]
}

run "policy_profile_named_like_the_function" {
  command = plan
  variables {
    policy_file = "policies/profile-function-name.yaml"
    profile     = "scheduler-extender"
  }
  expect_failures = [var.policy_file]
}

run "policy_profile_named_like_another_function" {
  command = plan
  variables {
    policy_file   = "policies/profile-function-name.yaml"
    profile       = "scheduler-extender"
    function_name = "batch-extender"
  }
}

# The function lists the nodes before it serves: it cannot start without the API server and a token.
run "policy_kubernetes_source_without_the_api" {
  command = plan
  variables { policy_file = "policies/kubernetes-source.yaml" }
  expect_failures = [var.policy_file]
}

run "policy_kubernetes_source_without_a_token" {
  command = plan
  variables {
    policy_file        = "policies/kubernetes-source.yaml"
    kubernetes_api_url = "https://203.0.113.10"
  }
  expect_failures = [var.policy_file, var.kubernetes_token_secret_version]
}

run "policy_kubernetes_source_with_the_api_and_a_token" {
  command = plan
  variables {
    policy_file                     = "policies/kubernetes-source.yaml"
    kubernetes_api_url              = "https://203.0.113.10"
    kubernetes_ca_data              = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
}

run "policy_without_the_kubernetes_source_needs_no_api" {
  command = plan
  variables { policy_file = "policies/node-names.yaml" }
}

run "policy_for_full_nodes_with_node_names_sent" {
  command = plan
  variables { policy_file = "policies/full-nodes.yaml" }
  expect_failures = [var.node_cache_capable]
}

run "policy_for_full_nodes_in_json_with_node_names_sent" {
  command = plan
  variables { policy_file = "policies/full-nodes.json" }
  expect_failures = [var.node_cache_capable]
}

run "policy_for_full_nodes_with_full_nodes_sent" {
  command = plan
  variables {
    policy_file        = "policies/full-nodes.yaml"
    node_cache_capable = false
  }
}

run "policy_for_node_names_with_full_nodes_sent" {
  command = plan
  variables {
    policy_file        = "policies/node-names.yaml"
    node_cache_capable = false
  }
  expect_failures = [var.node_cache_capable]
}

run "policy_for_both_modes_with_full_nodes_sent" {
  command = plan
  variables {
    policy_file        = "policies/both-modes.yaml"
    node_cache_capable = false
  }
}

run "full_nodes_blind_resource_scoring_from_1_33" {
  command = plan
  variables {
    node_cache_capable = false
    kubernetes_version = "1.33.0"
  }
  expect_failures = [var.node_cache_capable]
}

run "full_nodes_blind_resource_scoring_from_1_33_as_gke_prints_it" {
  command = plan
  variables {
    node_cache_capable = false
    kubernetes_version = "v1.33.5-gke.1200"
  }
  expect_failures = [var.node_cache_capable]
}

run "full_nodes_on_1_35_accepted_explicitly" {
  command = plan
  variables {
    node_cache_capable           = false
    kubernetes_version           = "1.35.4"
    allow_blind_resource_scoring = true
  }
}

run "full_nodes_on_1_32" {
  command = plan
  variables {
    node_cache_capable = false
    kubernetes_version = "1.32.9"
  }
}

run "full_nodes_on_1_34_without_the_filter_verb" {
  command = plan
  variables {
    node_cache_capable = false
    kubernetes_version = "1.34.1"
    verbs              = ["prioritize"]
  }
}

run "policy_for_full_nodes_on_1_34" {
  command = plan
  variables {
    policy_file        = "policies/full-nodes.yaml"
    node_cache_capable = false
    kubernetes_version = "1.34.1"
  }
  expect_failures = [var.node_cache_capable]
}

run "bind_without_a_kubernetes_token" {
  command = plan
  variables {
    verbs              = ["filter", "bind"]
    kubernetes_api_url = "https://34.118.0.10"
  }
  expect_failures = [var.verbs, var.kubernetes_token_secret_version]
}

run "profile_unknown_to_the_embedded_policy" {
  command = plan
  variables { profile = "gpu" }
  expect_failures = [var.profile]
}

run "policy_without_a_default_profile" {
  command = plan
  variables { policy_file = "policies/gpu-batch.yaml" }
  expect_failures = [var.profile]
}

run "profile_of_the_policy" {
  command = plan
  variables {
    policy_file = "policies/gpu-batch.yaml"
    profile     = "batch"
  }
}

run "profile_misspelt" {
  command = plan
  variables {
    policy_file = "policies/gpu-batch.yaml"
    profile     = "bacth"
  }
  expect_failures = [var.profile]
}

# --- Pinned Kubernetes token --------------------------------------------------------------------------------------------

run "kubernetes_token_without_a_version" {
  command = plan
  variables {
    kubernetes_api_url      = "https://34.118.0.10"
    kubernetes_token_secret = "scheduler-extender-kube-token"
  }
  expect_failures = [var.kubernetes_token_secret_version]
}

run "kubernetes_token_at_latest" {
  command = plan
  variables {
    kubernetes_api_url              = "https://34.118.0.10"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "latest"
  }
  expect_failures = [var.kubernetes_token_secret_version]
}

# --- CPU in every form Cloud Run accepts --------------------------------------------------------------------------------

run "cpu_in_millicores" {
  command = plan
  variables { available_cpu = "1000m" }
}

run "cpu_two" {
  command = plan
  variables { available_cpu = "2" }
}

run "cpu_half_in_millicores_serves_one_request" {
  command = plan
  variables {
    available_cpu = "500m"
    concurrency   = 1
  }
}

run "cpu_fraction_above_one" {
  command = plan
  variables { available_cpu = "1.5" }
  expect_failures = [var.available_cpu]
}

run "cpu_not_a_quantity" {
  command = plan
  variables { available_cpu = "one" }
  expect_failures = [var.available_cpu]
}

run "concurrency_above_one_on_half_a_cpu_in_millicores" {
  command = plan
  variables {
    available_cpu = "500m"
    concurrency   = 2
  }
  expect_failures = [var.concurrency]
}

# --- Private clusters: direct VPC egress --------------------------------------------------------------------------------

run "private_endpoint_over_the_vpc" {
  command = plan
  variables {
    kubernetes_api_url              = "https://172.16.0.2"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
    direct_vpc_network              = "projects/acme/global/networks/prod"
    direct_vpc_subnetwork           = "projects/acme/regions/us-central1/subnetworks/functions"
  }
}

run "private_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://10.0.0.2"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "shared_address_space_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://100.64.0.2"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "shared_address_space_top_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://100.127.255.254:443"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "rfc1918_172_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://172.31.0.2/"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "ipv6_unique_local_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://[fd00::2]"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "ipv6_unique_local_fc_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://[fc12:3456::2]:6443"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "ipv6_link_local_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://[fe80::1]"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "link_local_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://169.254.20.10"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "class_e_endpoint_without_vpc_egress" {
  command = plan
  variables {
    kubernetes_api_url              = "https://240.0.0.10"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
  expect_failures = [var.kubernetes_api_url]
}

run "public_endpoint_next_to_shared_address_space" {
  command = plan
  variables {
    kubernetes_api_url              = "https://100.128.0.2"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
}

run "public_endpoint_next_to_rfc1918_172" {
  command = plan
  variables {
    kubernetes_api_url              = "https://172.32.0.2"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
}

run "public_ipv6_endpoint" {
  command = plan
  variables {
    kubernetes_api_url              = "https://[2001:4860:4860::8888]:443"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
}

run "hostname_endpoint" {
  command = plan
  variables {
    kubernetes_api_url              = "https://10.example.com"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
  }
}

run "authorized_networks_through_cloud_nat" {
  command = plan
  variables {
    kubernetes_api_url              = "https://34.118.0.10"
    kubernetes_token_secret         = "scheduler-extender-kube-token"
    kubernetes_token_secret_version = "1"
    direct_vpc_subnetwork           = "functions"
    direct_vpc_egress               = "VPC_EGRESS_ALL_TRAFFIC"
    direct_vpc_network_tags         = ["scheduler-extender"]
  }
}

run "all_traffic_egress_without_a_network" {
  command = plan
  variables { direct_vpc_egress = "VPC_EGRESS_ALL_TRAFFIC" }
  expect_failures = [var.direct_vpc_egress]
}

run "unknown_egress_setting" {
  command = plan
  variables {
    direct_vpc_network = "prod"
    direct_vpc_egress  = "ALL_TRAFFIC"
  }
  expect_failures = [var.direct_vpc_egress]
}

run "network_tags_without_a_network" {
  command = plan
  variables { direct_vpc_network_tags = ["scheduler-extender"] }
  expect_failures = [var.direct_vpc_network_tags]
}

# --- Alerts count over a window -----------------------------------------------------------------------------------------

run "alert_window_of_zero_minutes" {
  command = plan
  variables { alert_window_minutes = 0 }
  expect_failures = [var.alert_window_minutes]
}

run "alert_window_beyond_an_hour" {
  command = plan
  variables { alert_window_minutes = 61 }
  expect_failures = [var.alert_window_minutes]
}

run "alert_error_count_zero" {
  command = plan
  variables { alert_error_count = 0 }
  expect_failures = [var.alert_error_count]
}

run "alert_error_count_not_whole" {
  command = plan
  variables { alert_error_count = 2.5 }
  expect_failures = [var.alert_error_count]
}

run "latency_alert_minimum_zero" {
  command = plan
  variables { alert_latency_min_requests = 0 }
  expect_failures = [var.alert_latency_min_requests]
}

run "latency_alert_minimum_not_whole" {
  command = plan
  variables { alert_latency_min_requests = 20.5 }
  expect_failures = [var.alert_latency_min_requests]
}

# --- Memory: a unit, and Cloud Run's range and CPU pairing -----------------------------------------------------------

run "memory_without_a_unit_is_bytes" {
  command = plan
  variables { available_memory = "512" }
  expect_failures = [var.available_memory]
}

run "memory_unit_unknown" {
  command = plan
  variables { available_memory = "512MB" }
  expect_failures = [var.available_memory]
}

run "memory_below_128Mi" {
  command = plan
  variables { available_memory = "100M" }
  expect_failures = [var.available_memory]
}

run "memory_above_32Gi" {
  command = plan
  variables {
    available_memory = "33Gi"
    available_cpu    = "8"
  }
  expect_failures = [var.available_memory]
}

run "memory_at_the_lower_end" {
  command = plan
  variables { available_memory = "128Mi" }
}

run "memory_in_decimal_gigabytes" {
  command = plan
  variables { available_memory = "2G" }
}

run "memory_fraction_of_a_gibibyte" {
  command = plan
  variables { available_memory = "0.5Gi" }
}

run "memory_32Gi_on_8_cpus" {
  command = plan
  variables {
    available_memory = "32Gi"
    available_cpu    = "8"
  }
}

run "memory_8Gi_needs_2_cpus" {
  command = plan
  variables { available_memory = "8Gi" }
  expect_failures = [var.available_memory]
}

run "memory_8Gi_on_2_cpus" {
  command = plan
  variables {
    available_memory = "8Gi"
    available_cpu    = "2"
  }
}

run "memory_2Gi_needs_a_whole_cpu" {
  command = plan
  variables {
    available_memory = "2Gi"
    available_cpu    = "0.5"
    concurrency      = 1
  }
  expect_failures = [var.available_memory]
}

run "memory_1Gi_on_half_a_cpu" {
  command = plan
  variables {
    available_memory = "1Gi"
    available_cpu    = "500m"
    concurrency      = 1
  }
}

run "four_cpus_need_2Gi" {
  command = plan
  variables {
    available_memory = "1Gi"
    available_cpu    = "4"
  }
  expect_failures = [var.available_memory]
}

# NodeLoad's Prometheus credentials: Secret Manager secrets as files or PROMETHEUS_* variables, every one the policy
# names present.

run "prometheus_credentials_the_policy_names_are_all_mounted" {
  command = plan
  variables {
    policy_file = "policies/node-load-prometheus-auth.yaml"
    prometheus_secret_files = {
      "/etc/secrets/prometheus-token/token"  = { secret = "mimir-read-token" }
      "/etc/secrets/prometheus-ca/ca.crt"    = { secret = "mimir-ca", version = "2" }
      "/etc/secrets/prometheus-cert/tls.crt" = { secret = "mimir-client-cert" }
      "/etc/secrets/prometheus-key/tls.key"  = { secret = "mimir-client-key" }
    }
    prometheus_secret_environment_variables = {
      PROMETHEUS_PASSWORD = { secret = "prometheus-basic-password", version = "4" }
    }
  }
  assert {
    condition     = local.prometheus_secret_ids == toset(["mimir-read-token", "mimir-ca", "mimir-client-cert", "mimir-client-key", "prometheus-basic-password"])
    error_message = "secrets granted: ${jsonencode(local.prometheus_secret_ids)}"
  }
}

run "prometheus_file_the_policy_names_is_not_mounted" {
  command = plan
  variables {
    policy_file = "policies/node-load-prometheus-auth.yaml"
    prometheus_secret_files = {
      "/etc/secrets/prometheus-token/token" = { secret = "mimir-read-token" }
    }
    prometheus_secret_environment_variables = {
      PROMETHEUS_PASSWORD = { secret = "prometheus-basic-password", version = "4" }
    }
  }
  expect_failures = [var.prometheus_secret_files]
}

run "prometheus_variable_the_policy_names_is_not_set" {
  command = plan
  variables {
    policy_file = "policies/node-load-prometheus-auth.yaml"
    prometheus_secret_files = {
      "/etc/secrets/prometheus-token/token"  = { secret = "mimir-read-token" }
      "/etc/secrets/prometheus-ca/ca.crt"    = { secret = "mimir-ca" }
      "/etc/secrets/prometheus-cert/tls.crt" = { secret = "mimir-client-cert" }
      "/etc/secrets/prometheus-key/tls.key"  = { secret = "mimir-client-key" }
    }
  }
  expect_failures = [var.prometheus_secret_environment_variables]
}

run "prometheus_file_path_not_absolute" {
  command = plan
  variables {
    prometheus_secret_files = { "secrets/token" = { secret = "mimir-read-token" } }
  }
  expect_failures = [var.prometheus_secret_files]
}

run "prometheus_file_over_the_function_code" {
  command = plan
  variables {
    prometheus_secret_files = { "/workspace/token/token" = { secret = "mimir-read-token" } }
  }
  expect_failures = [var.prometheus_secret_files]
}

run "prometheus_files_sharing_a_directory" {
  command = plan
  variables {
    prometheus_secret_files = {
      "/etc/secrets/prometheus/tls.crt" = { secret = "mimir-client-cert" }
      "/etc/secrets/prometheus/tls.key" = { secret = "mimir-client-key" }
    }
  }
  expect_failures = [var.prometheus_secret_files]
}

run "prometheus_file_version_not_a_number" {
  command = plan
  variables {
    prometheus_secret_files = { "/etc/secrets/prometheus-token/token" = { secret = "mimir-read-token", version = "newest" } }
  }
  expect_failures = [var.prometheus_secret_files]
}

run "prometheus_variable_without_the_prefix" {
  command = plan
  variables {
    prometheus_secret_environment_variables = { GRAFANA_TOKEN = { secret = "grafana-cloud-token", version = "1" } }
  }
  expect_failures = [var.prometheus_secret_environment_variables]
}

run "prometheus_variable_at_latest" {
  command = plan
  variables {
    prometheus_secret_environment_variables = { PROMETHEUS_TOKEN = { secret = "grafana-cloud-token", version = "latest" } }
  }
  expect_failures = [var.prometheus_secret_environment_variables]
}
