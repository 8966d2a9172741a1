use clap::Parser as _;

use crate::cli::args::{Cli, Command};

#[test]
fn the_old_name_still_runs_it() {
    for name in ["remove-finalizers", "release-finalizers"] {
        let cli = Cli::try_parse_from(["mosc-guard", name, "--force"]).expect("parses");
        assert!(
            matches!(cli.command, Command::RemoveFinalizers(ref a) if a.force),
            "{name}"
        );
    }
}
