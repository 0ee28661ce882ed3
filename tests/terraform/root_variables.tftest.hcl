# The root module's own validation rules, run by test_terraform_root_variables.py against a copy of
# terraform/variables.tf alone (the rest of the root module needs the google provider).

variables {
  project_id         = "acme-scheduling"
  region             = "us-central1"
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
  variables { name = "ext" }
  expect_failures = [var.name]
}

run "name_with_uppercase" {
  command = plan
  variables { name = "Scheduler-Extender" }
  expect_failures = [var.name]
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
  variables { kubernetes_token_secret = "scheduler-extender-kube-token" }
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
    verbs                   = ["filter", "bind"]
    kubernetes_api_url      = "https://34.118.0.10"
    kubernetes_token_secret = "scheduler-extender-kube-token"
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
