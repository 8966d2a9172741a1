use super::*;

#[test]
fn columns_pad_every_column_but_the_last_to_its_widest_cell() {
    let rows = [
        ["node-a".to_string(), "worker".to_string(), "x".to_string()],
        [
            "n".to_string(),
            "infra".to_string(),
            "a longer image".to_string(),
        ],
    ];
    assert_eq!(
        columns(["NODE", "POOL", "IMAGE"], &rows),
        "NODE    POOL    IMAGE\n\
         node-a  worker  x\n\
         n       infra   a longer image\n"
    );
}
