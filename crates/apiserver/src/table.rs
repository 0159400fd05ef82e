//! `Table` output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): kubectl's usual
//! columns for built-ins, additionalPrinterColumns for custom resources.

use serde_json::{Value, json};

use crate::builtin::BuiltinKind;
use crate::crd::PrinterColumn;
use crate::resources::{Flavor, ResourceDef};

/// What each row carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// PartialObjectMetadata (kube-apiserver's default).
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter.
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("Object") => Ok(IncludeObject::Object),
            Some("None") => Ok(IncludeObject::None),
            Some(other) => Err(format!(
                "unsupported includeObject value {other:?}: use None, Metadata or Object"
            )),
        }
    }
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

const fn col(name: &'static str, ty: &'static str, priority: i64, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col(
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

fn builtin_columns(kind: BuiltinKind) -> Vec<Column> {
    use BuiltinKind as K;
    let mut cols = vec![NAME];
    let rest: Vec<Column> = match kind {
        K::Deployment => vec![
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "string",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "string",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            col(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            col(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            col("Selector", "string", 1, "Label selector for pods."),
        ],
        K::Pod => vec![
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted.",
            ),
            AGE,
            col("IP", "string", 1, "IP address allocated to the pod."),
            col("Node", "string", 1, "Name of the Node this pod is scheduled on."),
        ],
        K::Service => vec![
            col("Type", "string", 0, "The type of the service."),
            col("Cluster-IP", "string", 0, "The cluster IP of the service."),
            col("External-IP", "string", 0, "The external IP of the service."),
            col("Port(s)", "string", 0, "The ports of the service."),
            AGE,
            col("Selector", "string", 1, "The selector of the service."),
        ],
        K::ConfigMap => vec![col("Data", "integer", 0, "Number of keys in the data."), AGE],
        K::Secret => vec![
            col("Type", "string", 0, "The type of the secret."),
            col("Data", "integer", 0, "Number of keys in the data."),
            AGE,
        ],
        K::Namespace => vec![col("Status", "string", 0, "The status of the namespace."), AGE],
        K::ServiceAccount => vec![col("Secrets", "integer", 0, "Number of secrets."), AGE],
        K::StatefulSet => vec![
            col("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
        ],
        K::ReplicaSet => vec![
            col("Desired", "integer", 0, "Number of desired pods."),
            col("Current", "integer", 0, "Number of actual pods."),
            col("Ready", "integer", 0, "Number of ready pods."),
            AGE,
        ],
        K::DaemonSet => vec![
            col(
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            col(
                "Current",
                "integer",
                0,
                "The number of nodes running at least one daemon pod.",
            ),
            col(
                "Ready",
                "integer",
                0,
                "The number of nodes that have a ready daemon pod.",
            ),
            col(
                "Up-to-date",
                "integer",
                0,
                "The number of nodes running the updated daemon pod.",
            ),
            col(
                "Available",
                "integer",
                0,
                "The number of nodes with an available daemon pod.",
            ),
            col(
                "Node Selector",
                "string",
                0,
                "The node selector of the pod template.",
            ),
            AGE,
        ],
        K::Job => vec![
            col("Status", "string", 0, "Status of the job."),
            col(
                "Completions",
                "string",
                0,
                "The desired number of successfully finished pods the job should be run with.",
            ),
            col("Duration", "string", 0, "Time required to complete the job."),
            AGE,
        ],
        K::CronJob => vec![
            col("Schedule", "string", 0, "The schedule in Cron format."),
            col("Timezone", "string", 0, "The time zone."),
            col("Suspend", "boolean", 0, "Whether the cron job is suspended."),
            col("Active", "integer", 0, "Number of active jobs."),
            col("Last Schedule", "string", 0, "When the job was last scheduled."),
            AGE,
        ],
        K::Ingress => vec![
            col("Class", "string", 0, "The ingress class."),
            col(
                "Hosts",
                "string",
                0,
                "Hosts that incoming requests are matched against.",
            ),
            col(
                "Address",
                "string",
                0,
                "Address is a list containing ingress points for the load-balancer.",
            ),
            col("Ports", "string", 0, "Ports of TLS configurations that open."),
            AGE,
        ],
        K::Lease => vec![col("Holder", "string", 0, "The holder of the lease."), AGE],
        K::ClusterRole | K::ClusterRoleBinding | K::Role | K::RoleBinding => vec![AGE],
        K::PodDisruptionBudget => vec![
            col(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available.",
            ),
            col(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable.",
            ),
            col(
                "Allowed Disruptions",
                "integer",
                0,
                "How many pod disruptions are currently allowed.",
            ),
            AGE,
        ],
        K::Node => vec![
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            AGE,
            col("Version", "string", 0, "Kubelet Version reported by the node."),
        ],
        K::PersistentVolumeClaim => vec![
            col("Status", "string", 0, "The phase of the claim."),
            col("Volume", "string", 0, "The volume bound to the claim."),
            col("Capacity", "string", 0, "The capacity of the claim."),
            col("Access Modes", "string", 0, "The access modes of the claim."),
            col("StorageClass", "string", 0, "The storage class of the claim."),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "The volume attributes class of the claim.",
            ),
            AGE,
        ],
        K::PersistentVolume => vec![
            col("Capacity", "string", 0, "The capacity of the volume."),
            col("Access Modes", "string", 0, "The access modes of the volume."),
            col("Reclaim Policy", "string", 0, "The reclaim policy of the volume."),
            col("Status", "string", 0, "The phase of the volume."),
            col("Claim", "string", 0, "The claim bound to the volume."),
            col("StorageClass", "string", 0, "The storage class of the volume."),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "The volume attributes class.",
            ),
            col("Reason", "string", 0, "The reason of the phase."),
            AGE,
        ],
        K::Event | K::EventV1 => {
            return vec![
                col("Last Seen", "string", 0, "Time since the event was last seen."),
                col("Type", "string", 0, "Type of the event."),
                col("Reason", "string", 0, "Reason of the event."),
                col("Object", "string", 0, "The object the event is about."),
                col("Message", "string", 0, "Message of the event."),
            ];
        }
        K::Endpoints => vec![col("Endpoints", "string", 0, "Endpoints of the service."), AGE],
        K::CustomResourceDefinition => vec![col(
            "Created At",
            "date",
            0,
            "The time the definition was created.",
        )],
    };
    cols.extend(rest);
    cols
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

fn builtin_cells(kind: BuiltinKind, obj: &Value) -> Vec<Value> {
    use BuiltinKind as K;
    let name = json!(obj["metadata"]["name"].as_str().unwrap_or(""));
    let age = json!(age(obj));
    let spec = &obj["spec"];
    let status = &obj["status"];
    let rest: Vec<Value> = match kind {
        K::Deployment => {
            let containers = &spec["template"]["spec"]["containers"];
            let names: Vec<String> = containers
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| s(&c["name"]))
                .collect();
            let images: Vec<String> = containers
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| s(&c["image"]))
                .collect();
            vec![
                json!(format!(
                    "{}/{}",
                    int(&status["readyReplicas"]),
                    int(&spec["replicas"])
                )),
                json!(int(&status["updatedReplicas"])),
                json!(int(&status["availableReplicas"])),
                age,
                json!(names.join(",")),
                json!(images.join(",")),
                json!(crate::ops::format_selector(&spec["selector"])),
            ]
        }
        K::Pod => {
            let statuses = status["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = spec["containers"].as_array().map_or(0, Vec::len);
            let ready = statuses
                .iter()
                .filter(|c| c["ready"].as_bool() == Some(true))
                .count();
            let restarts: i64 = statuses.iter().map(|c| int(&c["restartCount"])).sum();
            let mut phase = status["reason"]
                .as_str()
                .or(status["phase"].as_str())
                .unwrap_or("Pending")
                .to_owned();
            if crate::objects::is_deleting(obj) {
                phase = "Terminating".into();
            }
            vec![
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!(restarts.to_string()),
                age,
                json!(or_none(s(&status["podIP"]))),
                json!(or_none(s(&spec["nodeName"]))),
            ]
        }
        K::Service => {
            let ty = spec["type"].as_str().unwrap_or("ClusterIP");
            let external = match ty {
                "ExternalName" => s(&spec["externalName"]),
                "LoadBalancer" => {
                    let ips: Vec<String> = status["loadBalancer"]["ingress"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|i| {
                            i["ip"]
                                .as_str()
                                .or(i["hostname"].as_str())
                                .unwrap_or("")
                                .to_owned()
                        })
                        .collect();
                    if ips.is_empty() {
                        "<pending>".into()
                    } else {
                        ips.join(",")
                    }
                }
                _ => spec["externalIPs"]
                    .as_array()
                    .map(|a| a.iter().map(s).collect::<Vec<_>>().join(","))
                    .unwrap_or_default(),
            };
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let proto = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64() {
                        Some(np) => format!("{}:{np}/{proto}", int(&p["port"])),
                        None => format!("{}/{proto}", int(&p["port"])),
                    }
                })
                .collect();
            let selector: Vec<String> = spec["selector"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect())
                .unwrap_or_default();
            vec![
                json!(ty),
                json!(or_none(s(&spec["clusterIP"]))),
                json!(or_none(external)),
                json!(or_none(ports.join(","))),
                age,
                json!(or_none(selector.join(","))),
            ]
        }
        K::ConfigMap => {
            let n = obj["data"].as_object().map_or(0, |m| m.len())
                + obj["binaryData"].as_object().map_or(0, |m| m.len());
            vec![json!(n), age]
        }
        K::Secret => {
            let n = obj["data"].as_object().map_or(0, |m| m.len());
            vec![json!(s(&obj["type"])), json!(n), age]
        }
        K::Namespace => vec![json!(s(&status["phase"])), age],
        K::ServiceAccount => vec![json!(obj["secrets"].as_array().map_or(0, Vec::len)), age],
        K::StatefulSet => vec![
            json!(format!(
                "{}/{}",
                int(&status["readyReplicas"]),
                int(&spec["replicas"])
            )),
            age,
        ],
        K::ReplicaSet => vec![
            json!(int(&spec["replicas"])),
            json!(int(&status["replicas"])),
            json!(int(&status["readyReplicas"])),
            age,
        ],
        K::DaemonSet => {
            let selector: Vec<String> = spec["template"]["spec"]["nodeSelector"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect())
                .unwrap_or_default();
            vec![
                json!(int(&status["desiredNumberScheduled"])),
                json!(int(&status["currentNumberScheduled"])),
                json!(int(&status["numberReady"])),
                json!(int(&status["updatedNumberScheduled"])),
                json!(int(&status["numberAvailable"])),
                json!(or_none(selector.join(","))),
                age,
            ]
        }
        K::Job => {
            let completions = spec["completions"].as_i64();
            let succeeded = int(&status["succeeded"]);
            let complete = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["status"] == "True" && (c["type"] == "Complete" || c["type"] == "Failed"))
                .map(|c| s(&c["type"]));
            let state = match complete.as_deref() {
                Some("Complete") => "Complete",
                Some("Failed") => "Failed",
                _ if spec["suspend"].as_bool() == Some(true) => "Suspended",
                _ => "Running",
            };
            let duration = match (
                status["startTime"].as_str().and_then(crate::objects::parse_time),
                status["completionTime"]
                    .as_str()
                    .and_then(crate::objects::parse_time),
            ) {
                (Some(start), Some(end)) => human_duration((end.as_second() - start.as_second()).max(0)),
                (Some(start), None) => {
                    human_duration((jiff::Timestamp::now().as_second() - start.as_second()).max(0))
                }
                _ => String::new(),
            };
            vec![
                json!(state),
                json!(match completions {
                    Some(c) => format!("{succeeded}/{c}"),
                    None => format!("{succeeded}/1 of {}", int(&spec["parallelism"]).max(1)),
                }),
                json!(duration),
                age,
            ]
        }
        K::CronJob => vec![
            json!(s(&spec["schedule"])),
            json!(or_none(s(&spec["timeZone"]))),
            json!(spec["suspend"].as_bool().unwrap_or(false)),
            json!(status["active"].as_array().map_or(0, Vec::len)),
            json!(
                status["lastScheduleTime"]
                    .as_str()
                    .and_then(crate::objects::parse_time)
                    .map_or("<none>".to_owned(), since)
            ),
            age,
        ],
        K::Ingress => {
            let hosts: Vec<String> = spec["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["host"].as_str().map(str::to_owned))
                .collect();
            let addresses: Vec<String> = status["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    i["ip"]
                        .as_str()
                        .or(i["hostname"].as_str())
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            let ports = if spec["tls"].as_array().is_some_and(|t| !t.is_empty()) {
                "80, 443"
            } else {
                "80"
            };
            vec![
                json!(or_none(s(&spec["ingressClassName"]))),
                json!(if hosts.is_empty() {
                    "*".to_owned()
                } else {
                    hosts.join(",")
                }),
                json!(addresses.join(",")),
                json!(ports),
                age,
            ]
        }
        K::Lease => vec![json!(or_none(s(&spec["holderIdentity"]))), age],
        K::ClusterRole | K::ClusterRoleBinding | K::Role | K::RoleBinding => vec![age],
        K::PodDisruptionBudget => {
            let bound = |v: &Value| match v {
                Value::Null => "N/A".to_owned(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            vec![
                json!(bound(&spec["minAvailable"])),
                json!(bound(&spec["maxUnavailable"])),
                json!(status["disruptionsAllowed"].as_i64().unwrap_or(0)),
                age,
            ]
        }
        K::Node => {
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready")
                .map_or("Unknown", |c| {
                    if c["status"] == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                });
            let roles: Vec<String> = obj["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(str::to_owned))
                .collect();
            vec![
                json!(ready),
                json!(or_none(roles.join(","))),
                age,
                json!(s(&status["nodeInfo"]["kubeletVersion"])),
            ]
        }
        K::PersistentVolumeClaim => vec![
            json!(s(&status["phase"])),
            json!(s(&spec["volumeName"])),
            json!(s(&status["capacity"]["storage"])),
            json!(modes(&spec["accessModes"])),
            json!(or_unset(s(&spec["storageClassName"]))),
            json!(or_unset(s(&spec["volumeAttributesClassName"]))),
            age,
        ],
        K::PersistentVolume => {
            let claim = &spec["claimRef"];
            let claim = if claim.is_object() {
                format!("{}/{}", s(&claim["namespace"]), s(&claim["name"]))
            } else {
                String::new()
            };
            vec![
                json!(s(&spec["capacity"]["storage"])),
                json!(modes(&spec["accessModes"])),
                json!(s(&spec["persistentVolumeReclaimPolicy"])),
                json!(s(&status["phase"])),
                json!(claim),
                json!(s(&spec["storageClassName"])),
                json!(or_unset(s(&spec["volumeAttributesClassName"]))),
                json!(s(&status["reason"])),
                age,
            ]
        }
        K::Event | K::EventV1 => {
            let seen = obj["lastTimestamp"]
                .as_str()
                .or(obj["deprecatedLastTimestamp"].as_str())
                .or(obj["eventTime"].as_str())
                .or(obj["metadata"]["creationTimestamp"].as_str())
                .and_then(crate::objects::parse_time)
                .map_or("<unknown>".to_owned(), since);
            let involved = if obj["involvedObject"].is_object() {
                &obj["involvedObject"]
            } else {
                &obj["regarding"]
            };
            let message = obj["message"].as_str().or(obj["note"].as_str()).unwrap_or("");
            return vec![
                json!(seen),
                json!(s(&obj["type"])),
                json!(s(&obj["reason"])),
                json!(format!(
                    "{}/{}",
                    s(&involved["kind"]).to_lowercase(),
                    s(&involved["name"])
                )),
                json!(message),
            ];
        }
        K::Endpoints => {
            let mut eps = Vec::new();
            for subset in obj["subsets"].as_array().into_iter().flatten() {
                for a in subset["addresses"].as_array().into_iter().flatten() {
                    for p in subset["ports"].as_array().into_iter().flatten() {
                        eps.push(format!("{}:{}", s(&a["ip"]), int(&p["port"])));
                    }
                }
            }
            vec![json!(or_none(eps.join(","))), age]
        }
        K::CustomResourceDefinition => vec![json!(s(&obj["metadata"]["creationTimestamp"]))],
    };
    let mut cells = vec![name];
    cells.extend(rest);
    cells
}

fn modes(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn or_unset(v: String) -> String {
    if v.is_empty() { "<unset>".into() } else { v }
}

fn age(obj: &Value) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(crate::objects::parse_time)
        .map_or("<unknown>".to_owned(), since)
}

fn since(t: jiff::Timestamp) -> String {
    human_duration(jiff::Timestamp::now().as_second() - t.as_second())
}

/// k8s.io/apimachinery's `duration.HumanDuration` on whole seconds.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        let d = hours / 24;
        return if h == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24;
        let y = days / 365;
        let dy = days % 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Evaluates a printer column's JSONPath with kube-apiserver's cell rules.
fn custom_cell(column: &PrinterColumn, obj: &Value) -> Value {
    match flotilla_schema::jsonpath::JsonPath::parse_column(&column.json_path) {
        Ok(path) => path.cell(obj, &column.column_type),
        Err(_) => Value::Null,
    }
}

/// Column definitions and cells for `objs`.
pub fn table(
    def: &ResourceDef,
    objs: &[Value],
    include: IncludeObject,
    with_headers: bool,
    rv: &str,
    cont: Option<&str>,
) -> Value {
    let (columns, rows): (Vec<Value>, Vec<Vec<Value>>) = match &def.flavor {
        Flavor::Builtin(kind) => (
            builtin_columns(*kind)
                .into_iter()
                .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}))
                .collect(),
            objs.iter().map(|o| builtin_cells(*kind, o)).collect(),
        ),
        Flavor::Custom(info) => {
            let mut cols = vec![json!({"name": "Name", "type": "string", "format": "name", "description": NAME.description, "priority": 0})];
            for c in &info.printer_columns {
                cols.push(json!({"name": c.name, "type": c.column_type, "format": c.format, "description": c.description, "priority": c.priority}));
            }
            let has_age = info.printer_columns.iter().any(|c| c.name.eq_ignore_ascii_case("age"));
            if !has_age {
                cols.push(json!({"name": "Age", "type": "date", "format": "", "description": AGE.description, "priority": 0}));
            }
            let rows = objs
                .iter()
                .map(|o| {
                    let mut cells = vec![json!(o["metadata"]["name"].as_str().unwrap_or(""))];
                    cells.extend(info.printer_columns.iter().map(|c| custom_cell(c, o)));
                    if !has_age {
                        cells.push(json!(age(o)));
                    }
                    cells
                })
                .collect();
            (cols, rows)
        }
    };
    let rows: Vec<Value> = objs
        .iter()
        .zip(rows)
        .map(|(o, cells)| {
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]});
                }
                IncludeObject::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": if with_headers { Value::Array(columns) } else { Value::Null },
        "rows": rows,
    });
    if !with_headers {
        t["columnDefinitions"] = Value::Null;
    }
    if let Some(c) = cont {
        t["metadata"]["continue"] = json!(c);
    }
    t
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn human_durations_match_apimachinery() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(10 * 3600), "10h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn deployment_and_service_rows() {
        let d = json!({"metadata": {"name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "n", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let cells = builtin_cells(BuiltinKind::Deployment, &d);
        assert_eq!(cells[0], "web");
        assert_eq!(cells[1], "2/3");
        assert_eq!(cells[2], 3);
        assert_eq!(cells[7], "app=web");
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "10.0.0.1",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        let cells = builtin_cells(BuiltinKind::Service, &svc);
        assert_eq!(cells[1], "NodePort");
        assert_eq!(cells[3], "<none>");
        assert_eq!(cells[4], "80:30080/TCP,53/UDP");
        assert_eq!(builtin_columns(BuiltinKind::Service).len(), cells.len());
    }

    #[test]
    fn every_builtin_has_as_many_cells_as_columns() {
        for def in crate::builtin::definitions() {
            let Flavor::Builtin(kind) = def.flavor else {
                continue;
            };
            let cells = builtin_cells(kind, &json!({"metadata": {"name": "x"}}));
            assert_eq!(cells.len(), builtin_columns(kind).len(), "{kind:?}");
        }
    }
}
