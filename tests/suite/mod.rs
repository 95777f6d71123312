mod policy_bad_input;
mod policy_cli;
mod support;
