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
  variables { kubernetes_api_url = "http://10.0.0.1" }
  expect_failures = [var.kubernetes_api_url]
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

# --- Token rotation ---------------------------------------------------------------------------------------------------

run "rotation_with_the_previous_token" {
  command = plan
  variables {
    caller_token          = "n3wT0kenN3wT0kenN3wT0kenN3wT0kenN3wT0ken"
    caller_token_previous = "0ldT0ken0ldT0ken0ldT0ken0ldT0ken0ldT0ken"
  }
}

run "previous_token_too_short" {
  command = plan
  variables { caller_token_previous = "short" }
  expect_failures = [var.caller_token_previous]
}

run "previous_token_equal_to_the_current_one" {
  command = plan
  variables {
    caller_token          = "sameT0kenSameT0kenSameT0kenSameT0kenSame"
    caller_token_previous = "sameT0kenSameT0kenSameT0kenSameT0kenSame"
  }
  expect_failures = [var.caller_token_previous]
}

run "previous_token_without_a_token" {
  command = plan
  variables {
    invocation            = "iam"
    proxy_image           = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
    caller_token_previous = "0ldT0ken0ldT0ken0ldT0ken0ldT0ken0ldT0ken"
  }
  expect_failures = [var.caller_token_previous]
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
    kubernetes_api_url    = "https://172.16.0.2"
    direct_vpc_network    = "projects/acme/global/networks/prod"
    direct_vpc_subnetwork = "projects/acme/regions/us-central1/subnetworks/functions"
  }
}

run "private_endpoint_without_vpc_egress" {
  command = plan
  variables { kubernetes_api_url = "https://10.0.0.2" }
  expect_failures = [var.kubernetes_api_url]
}

run "authorized_networks_through_cloud_nat" {
  command = plan
  variables {
    kubernetes_api_url      = "https://34.118.0.10"
    direct_vpc_subnetwork   = "functions"
    direct_vpc_egress       = "VPC_EGRESS_ALL_TRAFFIC"
    direct_vpc_network_tags = ["scheduler-extender"]
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
