//! Whose fleet a request acts on, and with which rights: the caller's own on `/me/...`, an
//! organization's on its `/orgs/{orgId}/...` twin once the caller's role there includes what
//! the route needs. The handlers of both take [`Fleet<R>`] and act on `fleet.owner`, so every
//! fleet operation serves organizations unchanged (docs/design.md, "Organizations").

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use crate::http::api::{ApiError, Caller};
use crate::http::gateway::PathParams;
use crate::model::ids::{OrgId, UserId};
use crate::model::org::Role;
use crate::ops::orgs::access;
use crate::ops::orgs::members::Actor;
use crate::store::table::FleetTable;

/// The least role a route needs in an organization (a marker type of [`Fleet`]).
pub trait RequiredRole: Send + Sync + 'static {
    /// The role.
    const ROLE: Role;
}

/// Reads: dashboard, devices, events, summaries, commands, rollouts, rules, alarms, members.
pub struct ViewerRole;
/// Acknowledging alarms, setting desired state, sending commands.
pub struct OperatorRole;
/// Devices, tokens, rules, retention, rollouts, moves, members and invitations.
pub struct AdminRole;
/// Deleting the organization.
pub struct OwnerRole;

impl RequiredRole for ViewerRole {
    const ROLE: Role = Role::Viewer;
}
impl RequiredRole for OperatorRole {
    const ROLE: Role = Role::Operator;
}
impl RequiredRole for AdminRole {
    const ROLE: Role = Role::Admin;
}
impl RequiredRole for OwnerRole {
    const ROLE: Role = Role::Owner;
}

/// The caller's access to an organization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrgAccess {
    /// The organization.
    pub org_id: OrgId,
    /// The caller's role in it.
    pub role: Role,
}

/// The fleet a request acts on: `owner` is the key every fleet operation takes (the caller's
/// id on `/me/...`, `org:{orgId}` on `/orgs/{orgId}/...`). Extracting it on an organization
/// route reads the caller's role (AP-O13): a non-member is a 404, a member without `R`'s role
/// a 403 naming it, before anything else is read.
#[derive(Clone, Debug)]
pub struct Fleet<R> {
    /// The owner key of the fleet.
    pub owner: UserId,
    /// The person calling.
    pub caller: Caller,
    /// The organization and the caller's role in it, on an organization route.
    pub org: Option<OrgAccess>,
    role: PhantomData<fn() -> R>,
}

impl<R> Fleet<R> {
    /// The organization of an `/orgs/{orgId}...` route (every route that takes this is one).
    pub fn org_access(&self) -> Result<&OrgAccess, ApiError> {
        self.org
            .as_ref()
            .ok_or_else(|| ApiError::internal("an organization route without {orgId}"))
    }

    /// Where this fleet's routes are: `/me`, or `/orgs/{orgId}` (for `Location` headers).
    pub fn base_path(&self) -> String {
        match &self.org {
            Some(access) => format!("/orgs/{}", access.org_id),
            None => "/me".to_string(),
        }
    }

    /// The caller acting on the organization's members.
    pub fn actor(&self) -> Result<Actor, ApiError> {
        Ok(Actor {
            user: self.caller.user_id.clone(),
            role: self.org_access()?.role,
        })
    }
}

impl<S, R> FromRequestParts<S> for Fleet<R>
where
    S: Send + Sync,
    FleetTable: FromRef<S>,
    R: RequiredRole,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        // Fail closed: a path that cannot be read (a parameter not UTF-8 once decoded) is a
        // 400, never the caller's personal fleet in place of the organization it named.
        let PathParams(params) =
            PathParams::<HashMap<String, String>>::from_request_parts(parts, state).await?;
        let Some(org) = params.get("orgId") else {
            return Ok(Self {
                owner: caller.user_id.clone(),
                caller,
                org: None,
                role: PhantomData,
            });
        };
        let org = OrgId::parse(org.as_str())?;
        let table = FleetTable::from_ref(state);
        let role = access::authorize(&table, &caller.user_id, &org, R::ROLE).await?;
        Ok(Self {
            owner: UserId::org_fleet(&org),
            caller,
            org: Some(OrgAccess { org_id: org, role }),
            role: PhantomData,
        })
    }
}

/// Routes served for a fleet, the caller's own and an organization's alike.
pub trait FleetRoutes<S> {
    /// Serves `route` at `/me{path}` and at its organization twin `/orgs/{orgId}{path}`.
    fn fleet_route(self, path: &str, route: axum::routing::MethodRouter<S>) -> Self;
}

impl<S: Clone + Send + Sync + 'static> FleetRoutes<S> for axum::Router<S> {
    fn fleet_route(self, path: &str, route: axum::routing::MethodRouter<S>) -> Self {
        self.route(&format!("/me{path}"), route.clone())
            .route(&format!("/orgs/{{orgId}}{path}"), route)
    }
}
