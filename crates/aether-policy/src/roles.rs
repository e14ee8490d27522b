//! The console's roles and their named permissions. Every admin API route needs one
//! permission ([`required`]); an account has one role; an operator token holds every
//! permission.

use serde::Serialize;

/// What an operator may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Read everything: approvals, audit, registry, agents, sources, policy, metrics.
    View,
    /// Approve or deny calls waiting for a person.
    ApproveCalls,
    /// Approve, withdraw and undo tool definitions.
    ManageRegistry,
    /// Replay drafts of the rules.
    ManagePolicy,
    /// Mint and revoke agents' bearer tokens.
    ManageAgents,
    /// Refresh upstreams, approve their tools, data sets and reports.
    ManageSources,
    /// Create, change and remove console accounts.
    ManageAccounts,
    /// Halt and resume.
    Halt,
}

impl Permission {
    pub const ALL: [Permission; 8] = [
        Permission::View,
        Permission::ApproveCalls,
        Permission::ManageRegistry,
        Permission::ManagePolicy,
        Permission::ManageAgents,
        Permission::ManageSources,
        Permission::ManageAccounts,
        Permission::Halt,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::View => "view",
            Permission::ApproveCalls => "approve_calls",
            Permission::ManageRegistry => "manage_registry",
            Permission::ManagePolicy => "manage_policy",
            Permission::ManageAgents => "manage_agents",
            Permission::ManageSources => "manage_sources",
            Permission::ManageAccounts => "manage_accounts",
            Permission::Halt => "halt",
        }
    }
}

/// A console role: a name and the permissions it grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Role {
    pub name: &'static str,
    pub permissions: &'static [Permission],
    pub about: &'static str,
}

/// The roles, least to most.
pub const ROLES: &[Role] = &[
    Role {
        name: "viewer",
        permissions: &[Permission::View],
        about: "sees everything, changes nothing",
    },
    Role {
        name: "approver",
        permissions: &[Permission::View, Permission::ApproveCalls, Permission::Halt],
        about: "decides calls waiting for a person, and can halt",
    },
    Role {
        name: "operator",
        permissions: &[
            Permission::View,
            Permission::ApproveCalls,
            Permission::ManageRegistry,
            Permission::ManagePolicy,
            Permission::ManageAgents,
            Permission::ManageSources,
            Permission::Halt,
        ],
        about: "runs Aether day to day: everything but accounts",
    },
    Role {
        name: "admin",
        permissions: &Permission::ALL,
        about: "everything, including accounts",
    },
];

pub fn role(name: &str) -> Option<&'static Role> {
    ROLES.iter().find(|r| r.name == name)
}

impl Role {
    pub fn grants(&self, permission: Permission) -> bool {
        self.permissions.contains(&permission)
    }
}

/// The permission an admin API request needs, by method and path; `None` for a route that is
/// not the API's (the router answers 404 for it anyway). Reading needs `view`; each change
/// needs the permission of what it changes. Anything not named here needs `manage_accounts`
/// (the most), so a route added without a line here is closed, not open.
pub fn required(method: &str, path: &str) -> Permission {
    let read = matches!(method, "GET" | "HEAD");
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    if under("/api/accounts") {
        return Permission::ManageAccounts;
    }
    if under("/api/tokens") {
        return Permission::ManageAgents;
    }
    if read {
        // What `view` reads, named one by one: a new read (a listing of secrets, say) is
        // closed until it is added here.
        let viewable = [
            "/api/session",
            "/api/events",
            "/api/approvals",
            "/api/audit",
            "/api/registry",
            "/api/agents",
            "/api/policy",
            "/api/halt",
            "/api/commands",
            "/api/tools",
            "/api/sources",
            "/api/progress",
            "/api/openapi.json",
            "/metrics",
        ];
        return if viewable.iter().any(|p| under(p)) {
            Permission::View
        } else {
            Permission::ManageAccounts
        };
    }
    if under("/api/approvals") {
        Permission::ApproveCalls
    } else if under("/api/registry") {
        Permission::ManageRegistry
    } else if under("/api/policy") {
        Permission::ManagePolicy
    } else if under("/api/sources") {
        Permission::ManageSources
    } else if path == "/api/halt" || path == "/api/resume" {
        Permission::Halt
    } else if path == "/api/audit/verify" {
        Permission::View
    } else {
        Permission::ManageAccounts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_needs_its_own_permission_and_unknown_ones_the_most() {
        assert_eq!(required("GET", "/api/audit"), Permission::View);
        assert_eq!(
            required("POST", "/api/approvals/x/approve"),
            Permission::ApproveCalls
        );
        assert_eq!(
            required("POST", "/api/registry/t/withdraw"),
            Permission::ManageRegistry
        );
        assert_eq!(required("POST", "/api/halt"), Permission::Halt);
        assert_eq!(
            required("POST", "/api/sources/refresh"),
            Permission::ManageSources
        );
        assert_eq!(required("GET", "/api/accounts"), Permission::ManageAccounts);
        assert_eq!(required("POST", "/api/tokens"), Permission::ManageAgents);
        assert_eq!(required("GET", "/api/tokens"), Permission::ManageAgents);
        assert_eq!(required("GET", "/api/secrets"), Permission::ManageAccounts);
        assert_eq!(required("GET", "/api/auditx"), Permission::ManageAccounts);
        assert_eq!(required("GET", "/metrics"), Permission::View);
        assert_eq!(
            required("POST", "/api/new-thing"),
            Permission::ManageAccounts
        );
        assert_eq!(
            required("DELETE", "/api/approvalsx"),
            Permission::ManageAccounts
        );
        let viewer = role("viewer").unwrap();
        assert!(viewer.grants(Permission::View) && !viewer.grants(Permission::Halt));
        assert!(role("admin").unwrap().permissions.len() == Permission::ALL.len());
        assert!(role("root").is_none());
    }
}
