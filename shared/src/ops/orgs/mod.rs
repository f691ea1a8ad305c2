//! Organizations: a fleet run by a team (issue 33). An organization's fleet is keyed as an
//! owner's, under the owner key `org:{orgId}`, so every fleet operation serves it unchanged;
//! this module holds what is new: the organization, its members and their roles
//! ([`access`]), invitations, and the views the API answers.

pub mod access;
pub mod invitations;
pub mod manage;
pub mod members;
pub mod revocation;
pub mod view;
pub(crate) mod writes;
