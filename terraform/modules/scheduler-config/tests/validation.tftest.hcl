# Every validation rule, failing at plan time as kube-scheduler would fail at start-up (or worse, silently).

variables {
  url                = "https://extender-abc123-uc.a.run.app"
  kubernetes_version = "1.31.4"
  test_cert_pem      = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
  test_key_pem       = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBn\n-----END EC PRIVATE KEY-----\n"
}

# --- url ---------------------------------------------------------------------------------------------------------------

run "url_with_query_string" {
  command = plan
  variables { url = "https://extender-abc123-uc.a.run.app/?token=secret" }
  expect_failures = [var.url]
}

run "url_not_http" {
  command = plan
  variables { url = "extender-abc123-uc.a.run.app" }
  expect_failures = [var.url]
}

run "url_plain_http_off_host" {
  command = plan
  variables { url = "http://extender.example.com" }
  expect_failures = [var.url]
}

run "url_plain_http_on_loopback_is_fine" {
  command = plan
  variables { url = "http://127.0.0.1:8080" }
  assert {
    condition     = output.url_prefix == "http://127.0.0.1:8080" && output.tls_verification == "plaintext-loopback"
    error_message = "A local extender on loopback may use plain HTTP."
  }
}

# --- caller_token, profile, verbs --------------------------------------------------------------------------------------

run "caller_token_too_short" {
  command = plan
  variables { caller_token = "tooshort" }
  expect_failures = [var.caller_token]
}

run "caller_token_not_url_safe" {
  command = plan
  variables { caller_token = "abcdefghijklmnopqrstuvwxyz/0123456789" }
  expect_failures = [var.caller_token]
}

run "profile_not_a_dns_label" {
  command = plan
  variables { profile = "GPU/a" }
  expect_failures = [var.profile]
}

run "profile_named_like_a_verb" {
  command = plan
  variables { profile = "filter" }
  expect_failures = [var.profile]
}

run "verbs_empty" {
  command = plan
  variables { verbs = [] }
  expect_failures = [var.verbs]
}

run "verbs_unknown" {
  command = plan
  variables { verbs = ["filter", "score"] }
  expect_failures = [var.verbs]
}

# --- weight, http_timeout ----------------------------------------------------------------------------------------------

run "weight_zero_with_prioritize" {
  command = plan
  variables { weight = 0 }
  expect_failures = [var.weight]
}

run "weight_negative_with_prioritize" {
  command = plan
  variables { weight = -2 }
  expect_failures = [var.weight]
}

run "weight_not_whole" {
  command = plan
  variables { weight = 1.5 }
  expect_failures = [var.weight]
}

run "http_timeout_bare_number" {
  command = plan
  variables { http_timeout = "5" }
  expect_failures = [var.http_timeout]
}

run "http_timeout_unknown_unit" {
  command = plan
  variables { http_timeout = "5sec" }
  expect_failures = [var.http_timeout]
}

run "http_timeout_zero" {
  command = plan
  variables { http_timeout = "0s" }
  expect_failures = [var.http_timeout]
}

run "http_timeout_negative" {
  command = plan
  variables { http_timeout = "-5s" }
  expect_failures = [var.http_timeout]
}

# --- managed_resources -------------------------------------------------------------------------------------------------

run "managed_resource_without_domain" {
  command = plan
  variables { managed_resources = [{ name = "gpu" }] }
  expect_failures = [var.managed_resources]
}

run "managed_resource_kubernetes_io" {
  command = plan
  variables { managed_resources = [{ name = "kubernetes.io/gpu" }] }
  expect_failures = [var.managed_resources]
}

run "managed_resource_sub_kubernetes_io" {
  command = plan
  variables { managed_resources = [{ name = "nvidia.kubernetes.io/gpu" }] }
  expect_failures = [var.managed_resources]
}

run "managed_resource_uppercase_domain" {
  command = plan
  variables { managed_resources = [{ name = "Example.com/gpu" }] }
  expect_failures = [var.managed_resources]
}

run "managed_resource_name_part_too_long" {
  command = plan
  variables { managed_resources = [{ name = "example.com/${join("", [for i in range(64) : "a"])}" }] }
  expect_failures = [var.managed_resources]
}

run "managed_resource_duplicate" {
  command = plan
  variables { managed_resources = [{ name = "example.com/gpu" }, { name = "example.com/gpu", ignored_by_scheduler = true }] }
  expect_failures = [var.managed_resources]
}

# --- tls ---------------------------------------------------------------------------------------------------------------

run "tls_ca_data_not_base64" {
  command = plan
  variables { tls = { ca_data = var.test_cert_pem } }
  expect_failures = [var.tls]
}

run "tls_ca_data_base64_but_not_pem" {
  command = plan
  variables { tls = { ca_data = base64encode("not a certificate") } }
  expect_failures = [var.tls]
}

run "tls_ca_data_and_ca_file" {
  command = plan
  variables {
    scheduler_deployment = "existing-scheduler"
    tls                  = { ca_data = base64encode(var.test_cert_pem), ca_file = "/etc/ssl/ca.pem" }
  }
  expect_failures = [var.tls]
}

run "tls_insecure_with_ca" {
  command = plan
  variables { tls = { ca_data = base64encode(var.test_cert_pem), insecure = true } }
  expect_failures = [var.tls]
}

run "tls_client_certificate_without_key" {
  command = plan
  variables { tls = { cert_data = base64encode(var.test_cert_pem) } }
  expect_failures = [var.tls]
}

run "tls_client_key_without_certificate" {
  command = plan
  variables {
    scheduler_deployment = "existing-scheduler"
    tls                  = { key_file = "/etc/ssl/client.key" }
  }
  expect_failures = [var.tls]
}

run "tls_client_certificate_as_data_and_file" {
  command = plan
  variables {
    scheduler_deployment = "existing-scheduler"
    tls                  = { cert_data = base64encode(var.test_cert_pem), cert_file = "/etc/ssl/client.pem" }
    tls_key_data         = base64encode(var.test_key_pem)
  }
  expect_failures = [var.tls]
}

run "tls_relative_file_path" {
  command = plan
  variables {
    scheduler_deployment = "existing-scheduler"
    tls                  = { ca_file = "ca.pem" }
  }
  expect_failures = [var.tls]
}

run "tls_with_plain_http_url" {
  command = plan
  variables {
    url = "http://127.0.0.1:8080"
    tls = { insecure = true }
  }
  expect_failures = [var.tls]
}

run "tls_with_identity_proxy" {
  command = plan
  variables {
    tls            = { ca_data = base64encode(var.test_cert_pem) }
    identity_proxy = { image = "europe-docker.pkg.dev/acme/tools/extender:0.1.0" }
  }
  expect_failures = [var.tls]
}

run "tls_files_with_the_second_scheduler" {
  command = plan
  variables {
    tls          = { ca_file = "/etc/kubernetes/pki/extender-ca.pem", cert_data = base64encode(var.test_cert_pem) }
    tls_key_data = base64encode(var.test_key_pem)
  }
  expect_failures = [var.tls]
}

run "tls_key_data_not_a_private_key" {
  command = plan
  variables {
    tls          = { cert_data = base64encode(var.test_cert_pem) }
    tls_key_data = base64encode(var.test_cert_pem)
  }
  expect_failures = [var.tls_key_data]
}

run "tls_ec_key_is_fine" {
  command = plan
  variables {
    tls          = { cert_data = base64encode(var.test_cert_pem) }
    tls_key_data = base64encode(var.test_key_pem)
  }
  assert {
    condition     = output.extender.tlsConfig.keyData == base64encode(var.test_key_pem)
    error_message = "An EC private key must be accepted as tls_key_data."
  }
}

# --- scheduler, namespace, lease, kubeconfig, version ------------------------------------------------------------------

run "scheduler_name_not_a_dns_label" {
  command = plan
  variables { scheduler_name = "Extender_Scheduler" }
  expect_failures = [var.scheduler_name]
}

run "scheduler_name_too_long" {
  command = plan
  variables { scheduler_name = "an-extender-scheduler-with-a-very-long-name" }
  expect_failures = [var.scheduler_name]
}

run "percentage_of_nodes_to_score_above_100" {
  command = plan
  variables { percentage_of_nodes_to_score = 101 }
  expect_failures = [var.percentage_of_nodes_to_score]
}

run "percentage_of_nodes_to_score_negative" {
  command = plan
  variables { percentage_of_nodes_to_score = -1 }
  expect_failures = [var.percentage_of_nodes_to_score]
}

run "percentage_of_nodes_to_score_not_whole" {
  command = plan
  variables { percentage_of_nodes_to_score = 50.5 }
  expect_failures = [var.percentage_of_nodes_to_score]
}

run "namespace_not_a_dns_label" {
  command = plan
  variables { namespace = "kube_system" }
  expect_failures = [var.namespace]
}

run "lease_name_not_a_dns_subdomain" {
  command = plan
  variables { leader_election_lease_name = "Kube-Scheduler" }
  expect_failures = [var.leader_election_lease_name]
}

run "kubeconfig_relative" {
  command = plan
  variables {
    scheduler_deployment = "existing-scheduler"
    kubeconfig           = "scheduler.conf"
  }
  expect_failures = [var.kubeconfig]
}

# --- scheduler_deployment: what the second scheduler's pod cannot use -------------------------------------------------

run "scheduler_deployment_unknown" {
  command = plan
  variables { scheduler_deployment = "control-plane" }
  expect_failures = [var.scheduler_deployment]
}

run "kubeconfig_with_the_second_scheduler" {
  # kubeadm's host file for a second scheduler: its pod mounts only its configuration, so kube-scheduler would exit.
  command = plan
  variables {
    scheduler_name = "load-aware"
    kubeconfig     = "/etc/kubernetes/scheduler.conf"
  }
  expect_failures = [var.kubeconfig]
}

run "second_scheduler_named_default_scheduler" {
  command = plan
  variables {
    scheduler_name               = "default-scheduler"
    percentage_of_nodes_to_score = null
  }
  expect_failures = [var.scheduler_name]
}

run "second_scheduler_on_the_control_planes_lease" {
  command = plan
  variables { leader_election_lease_name = "kube-scheduler" }
  expect_failures = [var.leader_election_lease_name]
}

run "second_scheduler_lease_named_kube_scheduler_elsewhere" {
  command = plan
  variables {
    namespace                  = "scheduling"
    leader_election_lease_name = "kube-scheduler"
  }
  assert {
    condition     = yamldecode(output.kube_scheduler_configuration).leaderElection.resourceName == "kube-scheduler"
    error_message = "A lease named kube-scheduler outside kube-system is no one else's lock."
  }
}

run "kubernetes_version_before_v1_config" {
  command = plan
  variables { kubernetes_version = "1.24.17" }
  expect_failures = [var.kubernetes_version]
}

run "kubernetes_version_without_patch" {
  command = plan
  # The image tag needs X.Y.Z; check-scheduler-config refuses "1.31-gke.1" too.
  variables { kubernetes_version = "1.31-gke.1" }
  expect_failures = [var.kubernetes_version]
}

run "scheduler_image_repository_with_tag" {
  command = plan
  variables { scheduler_image_repository = "registry.k8s.io/kube-scheduler:v1.31.4" }
  expect_failures = [var.scheduler_image_repository]
}

run "scheduler_image_and_repository_both_set_is_warned_about" {
  command = plan
  variables {
    scheduler_image_repository = "europe-docker.pkg.dev/acme/mirror/kube-scheduler"
    scheduler_image            = "europe-docker.pkg.dev/acme/mirror/kube-scheduler:v1.31.4"
  }
  expect_failures = [check.scheduler_image_matches_kubernetes_version]
}

run "scheduler_image_of_another_version_is_warned_about" {
  command = plan
  variables {
    kubernetes_version = "1.33.5-gke.1200"
    scheduler_image    = "europe-docker.pkg.dev/acme/mirror/kube-scheduler:v1.32.9"
  }
  expect_failures = [check.scheduler_image_matches_kubernetes_version]
}

run "replicas_zero" {
  command = plan
  variables { replicas = 0 }
  expect_failures = [var.replicas]
}

# --- identity_proxy ----------------------------------------------------------------------------------------------------

run "identity_proxy_without_image" {
  command = plan
  variables { identity_proxy = { image = "" } }
  expect_failures = [var.identity_proxy]
}

run "identity_proxy_on_the_schedulers_port" {
  command = plan
  variables { identity_proxy = { image = "europe-docker.pkg.dev/acme/tools/extender:0.1.0", port = 10259 } }
  expect_failures = [var.identity_proxy]
}

run "identity_proxy_on_a_privileged_port" {
  command = plan
  variables { identity_proxy = { image = "europe-docker.pkg.dev/acme/tools/extender:0.1.0", port = 80 } }
  expect_failures = [var.identity_proxy]
}

run "identity_proxy_to_plain_http" {
  command = plan
  variables {
    url            = "http://127.0.0.1:8080"
    identity_proxy = { image = "europe-docker.pkg.dev/acme/tools/extender:0.1.0" }
  }
  expect_failures = [var.identity_proxy]
}

run "percentage_of_nodes_to_score_on_the_default_scheduler" {
  command = plan
  variables {
    scheduler_deployment         = "existing-scheduler"
    scheduler_name               = "default-scheduler"
    percentage_of_nodes_to_score = 100
  }
  expect_failures = [var.percentage_of_nodes_to_score]
}

run "http_timeout_beyond_cloud_runs_cap" {
  command = plan
  variables { http_timeout = "1h0m1s" }
  expect_failures = [output.http_timeout_ms]
}
