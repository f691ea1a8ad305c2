//! The developer tool's library: the dev HTTP server that serves the template's routes with
//! the functions in-process and a stand-in JWT authorizer (also used by the load test and
//! the hostile-input tests). Never a dependency of a Lambda.

pub mod alarms;
pub mod console;
pub mod dev_server;
pub mod local_aws;
