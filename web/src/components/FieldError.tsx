/**
 * The message the API (or the form) gave for one field, beside its input: the input names
 * `id` in its `aria-describedby`. Nothing when the field has no error.
 */
export function FieldError({ id, message }: { id: string; message?: string | null }) {
  return message ? (
    <span id={id} class="field-error">
      {message}
    </span>
  ) : null;
}
