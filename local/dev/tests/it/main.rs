//! The developer tool's own tests on DynamoDB Local: the dev server of `make dev` (routes from
//! template.yaml, the stand-in authorizer, the console) and raw HTTP through it. One binary,
//! as `tests/it/`: run one area with `cargo test -p fleet-dev --test it <module>::`.

mod dev_server;
mod hostile_input;
