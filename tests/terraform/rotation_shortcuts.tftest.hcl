# Rotations done differently from the README, from a fresh deployment each (a test file starts from an empty state):
# steps 1 and 2 in one apply, tokens of one's own, a rotation abandoned after step 1, and no caller token at all.

variables {
  project_id         = "acme-scheduling"
  function_location  = "us-central1"
  invocation         = "public"
  kubernetes_version = "1.31.4"
}

run "deployed" {}

# Steps 1 and 2 together: the new slot's token is generated and rendered in one apply, while the function keeps
# accepting the token the schedulers hold until they roll.
run "steps_1_and_2_in_one_apply" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
  }
  assert {
    condition     = output.rendered == output.tokens["b"] && output.accepted == toset([run.deployed.rendered, output.rendered])
    error_message = "the function accepts the old token and the new one"
  }
}

# Abandoning the rotation: back to slot a, whose token never changed, then dropping slot b.
run "abandon_switch_back" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "a"
  }
  assert {
    condition     = output.rendered == run.deployed.rendered && contains(output.accepted, run.steps_1_and_2_in_one_apply.rendered)
    error_message = "switching back renders slot a's unchanged token, and schedulers that rolled keep working"
  }
}

run "abandon_drop_slot_b" {
  variables {
    caller_token_accepted_slots = ["a"]
  }
  assert {
    condition     = output.accepted == toset([run.deployed.rendered]) && keys(output.tokens) == ["a"]
    error_message = "back where it started, with slot b's token destroyed"
  }
}

# Tokens of one's own: step 1 brings slot b's, step 3 must take slot a's away with its slot.
run "own_tokens_deployed" {
  variables {
    caller_tokens = { a = "0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken" }
  }
  assert {
    condition     = output.rendered == "0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken" && output.accepted == toset([output.rendered])
    error_message = "a token of one's own replaces the generated one"
  }
}

run "own_tokens_step_1" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_tokens = {
      a = "0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken"
      b = "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"
    }
  }
  assert {
    condition     = output.accepted == toset(["0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken", "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"])
    error_message = "both tokens of one's own are accepted"
  }
}

run "own_tokens_step_2" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
    caller_tokens = {
      a = "0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken"
      b = "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"
    }
  }
  assert {
    condition     = output.rendered == "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"
    error_message = "the configuration carries slot b's token"
  }
}

# Forgot to drop slot a's token with its slot: refused, so a retired token cannot return with its slot later.
run "own_tokens_step_3_keeping_the_old_token_refused" {
  command = plan
  variables {
    caller_token_accepted_slots = ["b"]
    caller_token_active_slot    = "b"
    caller_tokens = {
      a = "0wnT0ken-a-0wnT0ken-a-0wnT0ken-a-0wnT0ken"
      b = "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"
    }
  }
  expect_failures = [var.caller_tokens]
}

run "own_tokens_step_3" {
  variables {
    caller_token_accepted_slots = ["b"]
    caller_token_active_slot    = "b"
    caller_tokens               = { b = "0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken" }
  }
  assert {
    condition     = output.accepted == toset(["0wnT0ken-b-0wnT0ken-b-0wnT0ken-b-0wnT0ken"])
    error_message = "only slot b's token is accepted"
  }
}

# IAM-only invocation has no token unless asked for: no slot, nothing rendered.
run "iam_invocation_without_token" {
  variables {
    invocation  = "iam"
    proxy_image = "us-docker.pkg.dev/acme/tools/scheduler-extender:0.1.0"
  }
  assert {
    condition     = length(output.tokens) == 0 && output.rendered == null && length(output.accepted) == 0
    error_message = "no caller token with IAM-only invocation"
  }
}
