# The caller-token rotation of terraform/README.md ("Rotating the caller token"), step by step, twice, with the steps a
# person may forget in between. Run by test_terraform_root_locals.py on variables.tf, main.tf's token expressions and
# stand-ins for the token and secret version resources: each run applies, so a token keeps its value from run to run
# exactly as long as Terraform would keep the resource.
#
# What the schedulers hold: the token `rendered` of the last run after which the manifests were applied (the deploy
# and each step 2). The invariant: the function accepts it after every apply, and again once the schedulers roll.

variables {
  project_id         = "acme-scheduling"
  function_location  = "us-central1"
  invocation         = "public"
  kubernetes_version = "1.31.4"
}

run "deployed" {
  assert {
    condition     = keys(output.tokens) == ["a"] && output.rendered == output.tokens["a"]
    error_message = "a first apply generates slot a's token and renders it"
  }
  assert {
    condition     = output.accepted == toset([output.tokens["a"]])
    error_message = "the function accepts the token the configuration carries, and only that one"
  }
  assert {
    condition     = keys(local.secret_environment_variables) == ["EXTENDER_CALLER_TOKEN"]
    error_message = "no second token variable outside a rotation"
  }
}

# Forgot step 1: switching to a slot the function does not accept yet is refused at plan.
run "forgot_step_1_switch_refused" {
  command = plan
  variables {
    caller_token_active_slot = "b"
  }
  expect_failures = [var.caller_token_active_slot]
}

run "step_1_accept_slot_b" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
  }
  assert {
    condition     = output.tokens["a"] == run.deployed.tokens["a"] && output.rendered == run.deployed.rendered
    error_message = "step 1 must leave slot a's token and the rendered configuration alone"
  }
  assert {
    condition     = output.accepted == toset([run.deployed.rendered, output.tokens["b"]]) && output.tokens["b"] != output.tokens["a"]
    error_message = "step 1 generates slot b's token, and the function accepts both"
  }
  assert {
    condition     = local.secret_environment_variables["EXTENDER_CALLER_TOKEN"].version == output.tokens["a"] && local.secret_environment_variables["EXTENDER_CALLER_TOKEN_PREVIOUS"].version == output.tokens["b"]
    error_message = "the active slot's token is EXTENDER_CALLER_TOKEN, the other accepted one EXTENDER_CALLER_TOKEN_PREVIOUS"
  }
}

# Applying a step again changes nothing.
run "step_1_applied_twice" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
  }
  assert {
    condition     = output.tokens == run.step_1_accept_slot_b.tokens && output.accepted == run.step_1_accept_slot_b.accepted
    error_message = "re-applying step 1 must change no token"
  }
}

# Forgot step 2: dropping slot a while the configuration still carries its token is refused at plan.
run "forgot_step_2_drop_refused" {
  command = plan
  variables {
    caller_token_accepted_slots = ["b"]
  }
  expect_failures = [var.caller_token_active_slot]
}

run "step_2_switch_to_slot_b" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
  }
  assert {
    condition     = output.rendered == run.step_1_accept_slot_b.tokens["b"] && output.tokens == run.step_1_accept_slot_b.tokens
    error_message = "step 2 renders slot b's token and changes no token"
  }
  assert {
    condition     = contains(output.accepted, run.deployed.rendered) && contains(output.accepted, output.rendered)
    error_message = "while the schedulers roll, the function accepts the token they had and the one they get"
  }
  assert {
    condition     = local.secret_environment_variables["EXTENDER_CALLER_TOKEN"].version == output.tokens["b"]
    error_message = "the active slot's token is EXTENDER_CALLER_TOKEN"
  }
}

# (The schedulers roll here: they now hold run.step_2_switch_to_slot_b.rendered.)

run "step_3_drop_slot_a" {
  variables {
    caller_token_accepted_slots = ["b"]
    caller_token_active_slot    = "b"
  }
  assert {
    condition     = output.accepted == toset([run.step_2_switch_to_slot_b.rendered]) && output.rendered == run.step_2_switch_to_slot_b.rendered
    error_message = "after step 3 the function accepts exactly the token the rolled schedulers hold"
  }
  assert {
    condition     = !contains(output.accepted, run.deployed.rendered) && keys(output.tokens) == ["b"]
    error_message = "the old token is refused and gone"
  }
  assert {
    condition     = keys(local.secret_environment_variables) == ["EXTENDER_CALLER_TOKEN"]
    error_message = "no second token variable once the rotation is finished"
  }
}

# The next rotation goes back to slot a, which gets a new token: a retired token never returns.
run "next_step_1_accept_slot_a" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
  }
  assert {
    condition     = output.tokens["a"] != run.deployed.tokens["a"] && output.tokens["b"] == run.step_3_drop_slot_a.tokens["b"]
    error_message = "slot a gets a new token; slot b keeps the one the schedulers hold"
  }
  assert {
    condition     = output.rendered == run.step_3_drop_slot_a.rendered && contains(output.accepted, output.rendered)
    error_message = "step 1 changes nothing the schedulers hold"
  }
}

run "next_step_2_switch_to_slot_a" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "a"
  }
  assert {
    condition     = output.rendered == run.next_step_1_accept_slot_a.tokens["a"] && contains(output.accepted, run.step_3_drop_slot_a.rendered)
    error_message = "the new configuration carries slot a's new token, and the schedulers' current one stays accepted"
  }
}

# Changing one's mind after the switch: switching back is safe, as both slots are still accepted.
run "switch_back_before_dropping" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "b"
  }
  assert {
    condition     = output.rendered == run.step_3_drop_slot_a.rendered && contains(output.accepted, run.next_step_2_switch_to_slot_a.rendered)
    error_message = "switching back renders slot b's token again, and slot a's stays accepted for schedulers that rolled"
  }
}

run "switch_again" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "a"
  }
  assert {
    condition     = output.rendered == run.next_step_2_switch_to_slot_a.rendered
    error_message = "no token changed while both slots were accepted"
  }
}

# Forgot step 3 (slot b still accepted), then started the next rotation: step 1 has nothing to add, its plan creates no
# token (which the README says to look for), and no token any scheduler may hold is refused.
run "forgot_step_3_next_step_1_adds_nothing" {
  variables {
    caller_token_accepted_slots = ["a", "b"]
    caller_token_active_slot    = "a"
  }
  assert {
    condition     = output.tokens == run.switch_again.tokens && output.accepted == run.switch_again.accepted
    error_message = "repeating step 1 with both slots accepted changes no token and refuses none"
  }
}

# The forgotten step 3, done late.
run "next_step_3_drop_slot_b" {
  variables {
    caller_token_accepted_slots = ["a"]
    caller_token_active_slot    = "a"
  }
  assert {
    condition     = output.accepted == toset([run.next_step_2_switch_to_slot_a.rendered]) && keys(output.tokens) == ["a"]
    error_message = "after the second rotation the function accepts exactly slot a's new token"
  }
}

# Dropping the active slot, the one change that would refuse the token the configuration carries, is refused whatever
# was forgotten before.
run "dropping_the_active_slot_refused" {
  command = plan
  variables {
    caller_token_accepted_slots = ["b"]
    caller_token_active_slot    = "a"
  }
  expect_failures = [var.caller_token_active_slot]
}
