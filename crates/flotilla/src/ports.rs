//! The loopback ports of an installation, chosen once and kept in `<data dir>/ports.json`, so
//! a restart on the same data dir serves every component at the same address (members stay
//! registered at the same endpoint). A recorded port that something else has taken since is
//! replaced by a free one (and members are registered again at the new endpoint).

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Errors reading or writing `ports.json`.
#[derive(Debug, thiserror::Error)]
pub enum PortsError {
    /// The file cannot be read or written.
    #[error("cannot {action} {path}: {message}; delete it to choose new ports")]
    File {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// No free port could be found.
    #[error("no free port on 127.0.0.1: {0}")]
    NoFreePort(std::io::Error),
}

/// A service's two ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePorts {
    /// `--grpc-addr`.
    pub grpc: u16,
    /// `--metrics-addr`.
    pub metrics: u16,
}

/// Every port of an installation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// API server ports by server name (`control-plane`, `member1`, ...).
    pub apiservers: BTreeMap<String, u16>,
    /// Service ports by binary name.
    pub services: BTreeMap<String, ServicePorts>,
}

/// What changed while assigning ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// The ports.
    pub ports: Ports,
    /// Recorded ports that were busy and got replaced: `(component, old, new)`.
    pub moved: Vec<(String, u16, u16)>,
}

/// Ports for the named API servers and services: the recorded ones where free, new free ones
/// otherwise. `is_free` decides whether a port can be used (see [`port_is_free`]); `pick`
/// returns a free port (see [`free_port`]).
pub fn assign(
    recorded: &Ports,
    apiservers: &[String],
    services: &[String],
    is_free: impl Fn(u16) -> bool,
    mut pick: impl FnMut() -> Result<u16, PortsError>,
) -> Result<Assignment, PortsError> {
    let mut taken = BTreeSet::new();
    let mut moved = Vec::new();
    let mut choose = |component: String, recorded: Option<u16>, taken: &mut BTreeSet<u16>| {
        if let Some(port) = recorded.filter(|p| !taken.contains(p) && is_free(*p)) {
            taken.insert(port);
            return Ok(port);
        }
        let port = loop {
            let port = pick()?;
            if taken.insert(port) {
                break port;
            }
        };
        if let Some(old) = recorded {
            moved.push((component, old, port));
        }
        Ok::<u16, PortsError>(port)
    };
    let mut ports = Ports::default();
    for name in apiservers {
        let port = choose(name.clone(), recorded.apiservers.get(name).copied(), &mut taken)?;
        ports.apiservers.insert(name.clone(), port);
    }
    for name in services {
        let old = recorded.services.get(name);
        let grpc = choose(format!("{name} gRPC"), old.map(|p| p.grpc), &mut taken)?;
        let metrics = choose(format!("{name} metrics"), old.map(|p| p.metrics), &mut taken)?;
        ports
            .services
            .insert(name.clone(), ServicePorts { grpc, metrics });
    }
    Ok(Assignment { ports, moved })
}

/// Reads `path` (an empty record when it does not exist).
pub fn load(path: &Path) -> Result<Ports, PortsError> {
    let error = |message: String| PortsError::File {
        action: "read",
        path: path.display().to_string(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| error(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ports::default()),
        Err(e) => Err(error(e.to_string())),
    }
}

/// Writes `ports` to `path`.
pub fn save(path: &Path, ports: &Ports) -> Result<(), PortsError> {
    let error = |message: String| PortsError::File {
        action: "write",
        path: path.display().to_string(),
        message,
    };
    let text = serde_json::to_string_pretty(ports).map_err(|e| error(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| error(e.to_string()))
}

/// Whether `port` on 127.0.0.1 can be listened on now.
pub fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A port on 127.0.0.1 that is free now.
pub fn free_port() -> Result<u16, PortsError> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(PortsError::NoFreePort)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn counter(start: u16) -> impl FnMut() -> Result<u16, PortsError> {
        let mut next = start;
        move || {
            next += 1;
            Ok(next)
        }
    }

    #[test]
    fn first_run_picks_distinct_ports() {
        let assignment = assign(
            &Ports::default(),
            &names(&["control-plane", "member1"]),
            &names(&["flotilla-scheduler"]),
            |_| true,
            counter(100),
        )
        .unwrap();
        assert_eq!(assignment.ports.apiservers["control-plane"], 101);
        assert_eq!(assignment.ports.apiservers["member1"], 102);
        assert_eq!(
            assignment.ports.services["flotilla-scheduler"],
            ServicePorts {
                grpc: 103,
                metrics: 104
            }
        );
        assert!(assignment.moved.is_empty());
    }

    #[test]
    fn recorded_ports_are_kept_and_busy_ones_replaced() {
        let recorded = Ports {
            apiservers: [("control-plane".to_owned(), 7000), ("member1".to_owned(), 7001)].into(),
            services: [(
                "flotilla-scheduler".to_owned(),
                ServicePorts {
                    grpc: 7002,
                    metrics: 7003,
                },
            )]
            .into(),
        };
        let assignment = assign(
            &recorded,
            &names(&["control-plane", "member1", "member2"]),
            &names(&["flotilla-scheduler"]),
            |port| port != 7001,
            counter(8000),
        )
        .unwrap();
        assert_eq!(assignment.ports.apiservers["control-plane"], 7000);
        assert_eq!(assignment.ports.apiservers["member1"], 8001);
        assert_eq!(assignment.ports.apiservers["member2"], 8002);
        assert_eq!(assignment.ports.services["flotilla-scheduler"].grpc, 7002);
        assert_eq!(
            assignment.moved,
            vec![("member1".to_owned(), 7001, 8001)],
            "only recorded ports count as moved"
        );
    }

    #[test]
    fn a_picked_port_is_never_handed_out_twice() {
        let mut answers = vec![5, 5, 6].into_iter();
        let assignment = assign(
            &Ports::default(),
            &names(&["a", "b"]),
            &[],
            |_| true,
            move || Ok(answers.next().unwrap()),
        )
        .unwrap();
        assert_eq!(assignment.ports.apiservers["a"], 5);
        assert_eq!(assignment.ports.apiservers["b"], 6);
    }

    #[test]
    fn round_trips_through_the_file() {
        let dir = std::env::temp_dir().join(format!("flotilla-ports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ports.json");
        assert_eq!(load(&path).unwrap(), Ports::default());
        let ports = assign(
            &Ports::default(),
            &names(&["cp"]),
            &names(&["s"]),
            |_| true,
            counter(10),
        )
        .unwrap()
        .ports;
        save(&path, &ports).unwrap();
        assert_eq!(load(&path).unwrap(), ports);
        std::fs::write(&path, "{not json").unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("delete it"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(free_port().unwrap() > 0);
    }
}
