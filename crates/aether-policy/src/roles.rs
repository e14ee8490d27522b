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
    /// Halt and resume; stop an agent run.
    Halt,
    /// Undo the file changes of a call (from the journal).
    UndoChanges,
}

impl Permission {
    pub const ALL: [Permission; 9] = [
        Permission::View,
        Permission::ApproveCalls,
        Permission::ManageRegistry,
        Permission::ManagePolicy,
        Permission::ManageAgents,
        Permission::ManageSources,
        Permission::ManageAccounts,
        Permission::Halt,
        Permission::UndoChanges,
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
            Permission::UndoChanges => "undo_changes",
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
            Permission::UndoChanges,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_can_view_and_only_admin_manages_accounts() {
        for role in ROLES {
            assert!(role.grants(Permission::View), "{}", role.name);
        }
        let managers: Vec<&str> = ROLES
            .iter()
            .filter(|r| r.grants(Permission::ManageAccounts))
            .map(|r| r.name)
            .collect();
        assert_eq!(managers, ["admin"]);
    }
}
