//! What a machine's first boot came to, as the simulator reports it to tests.

/// What a simulated machine's first boot did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstBoot {
    /// The pool whose Ignition the pointer Ignition fetched (`/config/<pool>`).
    pub pool: String,
    /// The rendered MachineConfig the Machine Config Server served.
    pub config: String,
    /// The layered image it served (4.21 and later, `resolveDesiredImageForPool`), if any.
    pub image: Option<String>,
    pub outcome: BootOutcome,
}

/// How a first boot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootOutcome {
    /// Ignition fetched; the image not pulled yet (or the boot is held).
    Booting,
    /// The Node registered under this name.
    Joined(String),
    /// `machine-config-daemon-firstboot` failed (the serial console's error): no Node registers.
    Failed(String),
}
