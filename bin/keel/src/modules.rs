//! The modules compiled into this build: one line each, behind the module's Cargo feature. The
//! order is the mounting and migration order; the build order puts the identity provider and
//! the task runner first whatever their place (see `kernel::module`).

use kernel::module::ModuleEntry;

/// Every module this build was compiled with.
pub fn compiled() -> Vec<ModuleEntry> {
    vec![
        #[cfg(feature = "auth")]
        kernel::module::entry::<auth_core::AuthModule>(),
        #[cfg(feature = "blog")]
        kernel::module::entry::<blog_core::BlogModule>(),
        #[cfg(feature = "tasks")]
        kernel::module::entry::<tasks_core::TasksModule>(),
        #[cfg(feature = "comms")]
        kernel::module::entry::<comms_core::CommsModule>(),
        #[cfg(feature = "ai")]
        kernel::module::entry::<ai_core::AiModule>(),
        #[cfg(feature = "payment")]
        kernel::module::entry::<payment_core::PaymentModule>(),
    ]
}

/// The names of every compiled module, in order.
pub fn names() -> Vec<&'static str> {
    compiled().iter().map(|e| e.name).collect()
}
