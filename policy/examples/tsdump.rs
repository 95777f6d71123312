fn dump(node: tree_sitter::Node, src: &[u8], depth: usize) {
    let text = node.utf8_text(src).unwrap_or("?");
    let short: String = text.chars().take(40).collect();
    let field = "";
    println!(
        "{}{}{} {:?}{}",
        "  ".repeat(depth),
        if node.is_named() { "" } else { "'" },
        node.kind(),
        short,
        if node.is_error() || node.is_missing() {
            " <<ERR>>"
        } else {
            field
        }
    );
    let mut c = node.walk();
    for (i, ch) in node.children(&mut c).enumerate() {
        let f = node.field_name_for_child(i as u32).unwrap_or("");
        if !f.is_empty() {
            print!("{}[{}]", "  ".repeat(depth + 1), f);
            println!();
        }
        dump(ch, src, depth + 1);
    }
}
fn main() {
    let src = std::env::args().nth(1).unwrap();
    let mut p = tree_sitter::Parser::new();
    p.set_language(&tree_sitter_bash::LANGUAGE.into()).unwrap();
    let t = p.parse(&src, None).unwrap();
    dump(t.root_node(), src.as_bytes(), 0);
}
