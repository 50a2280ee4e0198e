//! Tables as text: the columns `tether drift` and `tether break-glass list`
//! print.

/// Rows of cells as text columns two spaces apart, trailing space trimmed.
pub fn aligned(lines: &[Vec<String>]) -> String {
    let columns = lines.first().map(Vec::len).unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    lines
        .iter()
        .map(|line| {
            let cells: Vec<String> = line
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            format!("{}\n", cells.join("  ").trim_end())
        })
        .collect()
}
