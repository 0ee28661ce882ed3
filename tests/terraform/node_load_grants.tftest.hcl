# roles/monitoring.viewer for the function's account: which projects a policy's NodeLoad entries read with Google auth.
# Run by test_terraform_root_locals.py on variables.tf and main.tf's expressions.

variables {
  project_id         = "acme-scheduling"
  function_location  = "us-central1"
  invocation         = "public"
  kubernetes_version = "1.31.4"
}

run "embedded_policy_needs_no_grant" {
  command = plan
  assert {
    condition     = length(local.monitoring_viewer_projects) == 0
    error_message = "the embedded policy reads no metrics"
  }
}

run "gke_preset_reads_the_functions_project_with_google_auth" {
  command = plan
  variables {
    policy_file = "policies/node-load-gke.yaml"
  }
  assert {
    condition     = local.monitoring_viewer_projects == toset(["acme-scheduling"])
    error_message = "the gke preset defaults to Google auth on GOOGLE_CLOUD_PROJECT (project_id)"
  }
}

run "explicit_url_names_the_project" {
  command = plan
  variables {
    policy_file = "policies/node-load-projects.yaml"
  }
  assert {
    condition     = local.monitoring_viewer_projects == toset(["cluster-project", "acme-scheduling"])
    error_message = "an explicit Cloud Monitoring URL with auth google names its project; the gke preset names project_id; a self-run Prometheus needs nothing"
  }
}

run "explicit_auth_overrides_the_gke_preset" {
  command = plan
  variables {
    policy_file = "policies/node-load-gke-without-google-auth.yaml"
  }
  assert {
    condition     = length(local.monitoring_viewer_projects) == 0
    error_message = "auth: none on the gke preset reads without the function's identity"
  }
}

run "policy_without_node_load" {
  command = plan
  variables {
    policy_file = "policies/both-modes.yaml"
  }
  assert {
    condition     = length(local.monitoring_viewer_projects) == 0
    error_message = "no NodeLoad, no grant"
  }
}
